// (being written)
#include "core/plan/Plan.h"
