// Sideways and downward includes are allowed.
#include <vector>
#include "storage/Sqlite.h"
#include "ui/Theme.h"
