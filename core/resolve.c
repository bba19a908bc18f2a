#include "resolve.h"
