#include "classify.h"
