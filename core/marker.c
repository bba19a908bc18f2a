#include "marker.h"
