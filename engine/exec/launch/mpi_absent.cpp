// mpi_bootstrap.h in a build without MPI (EMBEDSCOPE_WITH_MPI off or MPI not found): every
// function says so, so that `mpirun ... embedscope run` without --rendezvous names the fix.
#include "embedscope/engine/exec/launch/mpi_bootstrap.h"

#include <stdexcept>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::launch {

bool built_with_mpi() { return false; }

MpiBootstrap mpi_bootstrap(const std::string&) {
  throw SpecError("this embedscope was built without MPI (configure with libopenmpi-dev installed and "
                  "-DEMBEDSCOPE_WITH_MPI=ON): under mpirun give --rendezvous file:///shared/dir or redis://HOST:PORT");
}

std::vector<MpiRankEnd> mpi_finish(const MpiBootstrap&, int, const std::string&) {
  throw std::logic_error("mpi_finish: this embedscope was built without MPI");
}

}  // namespace embedscope::engine::launch
