/* The global line's latch (line.h): written through fc_line_publish by the
 * global track's one writer (calibration.c), read by every read path -- and,
 * through fastclock_line_v1 (clock.c), by fastclock_inline.h's inline reads,
 * compiled into programs against the layout below.  These checks keep the
 * latch and that public mirror from drifting apart: a change that moves a
 * field the inline read uses does not build (and must instead give the old
 * name a latch whose lines have fast_span 0, fastclock_inline.h's ABI note). */
#include "line.h"

#include <stddef.h>

#include "fastclock_inline.h"

struct fc_latch fc_latch;

#define FC_SAME_FIELD(ours, theirs, field)                                                        \
    _Static_assert(offsetof(ours, field) == offsetof(theirs, field) &&                            \
                       sizeof(((ours *)0)->field) == sizeof(((theirs *)0)->field),                \
                   "fastclock_inline.h's " #theirs "." #field " no longer mirrors " #ours)

FC_SAME_FIELD(struct fc_latch, struct fastclock_line_block_v1, seq);
FC_SAME_FIELD(struct fc_latch, struct fastclock_line_block_v1, read_flags);
FC_SAME_FIELD(struct fc_latch, struct fastclock_line_block_v1, line);
_Static_assert(offsetof(struct fc_latch, kernel_direct) == offsetof(struct fastclock_line_block_v1, kernel_gettime),
               "fastclock_inline.h's kernel_gettime no longer mirrors fc_latch.kernel_direct");
FC_SAME_FIELD(struct fc_line, struct fastclock_line_slot_v1, base_tsc);
FC_SAME_FIELD(struct fc_line, struct fastclock_line_slot_v1, fast_span);
FC_SAME_FIELD(struct fc_line, struct fastclock_line_slot_v1, mult);
FC_SAME_FIELD(struct fc_line, struct fastclock_line_slot_v1, base_ns);
FC_SAME_FIELD(struct fc_line, struct fastclock_line_slot_v1, frac_c);
_Static_assert(sizeof(struct fc_line) == sizeof(struct fastclock_line_slot_v1),
               "fastclock_inline.h's line slot is not the size of struct fc_line");
/* The read flags' meanings as the inline read takes them: bit 0 chooses
 * rdtscp, any other bit sends the read to the function. */
_Static_assert(FC_READ_RDTSCP == 1u, "fastclock_inline.h reads bit 0 of read_flags as rdtscp");
_Static_assert(FC_SHIFT == 32, "fastclock_inline.h shifts by 32");
