/* The CPU backend's one public entry: the op table on OpenBLAS and OpenMP loops. */
#ifndef TFC_CPU_CPU_H
#define TFC_CPU_CPU_H

#include "core/backend.h"

/* The CPU backend; `threads` <= 0 means all cores. Never fails. */
tfc_backend *tfc_cpu_backend_create(int threads);

#endif
