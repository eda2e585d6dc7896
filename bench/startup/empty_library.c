/* A shared library with nothing in it: preloaded, it shows what the dynamic
 * loader alone charges a process on this machine (open, map, relocate), the
 * floor under any library's start-up cost, fastclock's included. */
int fastclock_startup_empty_library(void);
int fastclock_startup_empty_library(void) { return 0; }
