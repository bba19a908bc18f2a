#include "collision.h"
