// Everything is in the header (static inline, so the calls cost no extra jump); a C target
// needs one source file.
#include "OperationsFutex.h"
