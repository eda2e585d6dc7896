#include <stdio.h>
#include "fastclock.h"
int main(void){ struct fastclock_status st; fastclock_status(&st); printf("mode %s: %s\n", st.mode, st.reason); return 0; }
