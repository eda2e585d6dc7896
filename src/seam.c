/* The test seam's one instance (seam.h; installed by testing.c only).  In a
 * file of its own, at the bottom of the house: every layer may consult it,
 * and none of them owns it. */
#include "seam.h"

struct fc_seam fc_seam;
