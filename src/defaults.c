/* Link-time defaults that other parts of the build may override.  In a file
 * of their own: a weak constant defined in the file that reads it can be
 * folded by the compiler, and then the override never takes effect. */
#include "mode.h"

/* The preload shim defines a strong fc_default_lazy = 1: no calibrator
 * thread in every process it is loaded into. */
__attribute__((weak)) const int fc_default_lazy = 0;
