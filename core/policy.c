#include "policy.h"
