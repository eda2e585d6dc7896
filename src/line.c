/* The global line's latch (line.h): written through fc_line_publish by the
 * global track's one writer (calibration.c), read by every read path. */
#include "line.h"

struct fc_latch fc_latch;
