#include "catalog.h"
