// A planted upward include: the vocabulary reaching for the run file.
#pragma once
#include "storage/Sqlite.h"
