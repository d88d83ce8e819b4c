/* exports.c: the host's export hook, as seen from Python. Nothing here is
 * exported: the library's only exported symbol is manypy_interp_get_api. */
#ifndef MANYPY_INTERP_EXPORTS_H
#define MANYPY_INTERP_EXPORTS_H

#include "state.h"

/* Makes PackageExporter add the host's export files (exports.c). */
int mpi_install_export_files(const mpi_sink* sink);

#endif
