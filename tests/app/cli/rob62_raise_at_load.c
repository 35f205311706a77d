/* Test support for rob62_early_signal_test.cpp: a library (LD_PRELOAD) whose initialiser sends its
 * process the signal EMBEDSCOPE_TEST_RAISE_AT_LOAD names ("INT" or "TERM"). The dynamic loader runs
 * the initialisers of the shared libraries after the executable's .preinit_array and before main,
 * so the signal comes exactly in the window where `embedscope run` used to have no handler yet
 * (its libraries' initialisers and main's command-line parsing: about 60-100 ms of a real start). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

__attribute__((constructor)) static void rob62_raise_at_load(void) {
  const char* which = getenv("EMBEDSCOPE_TEST_RAISE_AT_LOAD");
  if (!which) return;
  if (strcmp(which, "INT") == 0) raise(SIGINT);
  if (strcmp(which, "TERM") == 0) raise(SIGTERM);
}
