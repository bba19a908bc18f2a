#include "stateroot.h"
