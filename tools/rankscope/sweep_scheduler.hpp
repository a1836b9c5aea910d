#pragma once
// Who runs which cell of a sweep: local worker threads, or MPI ranks with rank 0 handing out cells one at a time
// (dynamic load balancing: a rank asks for the next cell whenever one of its workers is free). A cell is run by a
// CellRunner, which writes the cell's folder itself; the scheduler only moves cell indices and outcomes.
#include <functional>
#include <string>
#include <vector>

namespace rankscope::cli {

struct CellOutcome {
    int index = -1;
    bool ok = false;
    double seconds = 0;
    std::string error;  // one line, when !ok
    int rank = 0;       // the MPI rank that ran it (0 locally)
};

using CellRunner = std::function<CellOutcome(int index)>;
// Called (from one thread at a time) when a cell starts (finished == nullptr) and when it ends.
using CellEvent = std::function<void(int index, const CellOutcome* finished)>;

// Runs every cell of `pending` on `workers` threads; returns the outcomes in `pending` order. An interrupt (SIGINT,
// SIGTERM) stops the handing out; the cells running then end (their runner throws) and the first such error is
// rethrown after every worker has stopped.
std::vector<CellOutcome> run_cells_locally(const std::vector<int>& pending, int workers, const CellRunner& run,
                                           const CellEvent& event);

// MPI. Built with MPI (RANKSCOPE_WITH_MPI) and started by an MPI launcher (mpirun, srun): a session of
// MPI_COMM_WORLD; otherwise size() == 1 and every call is local.
class MpiSession {
public:
    MpiSession(int& argc, char**& argv);  // MPI_Init_thread(FUNNELED) when launched by MPI
    ~MpiSession();                        // MPI_Finalize
    int rank() const { return rank_; }
    int size() const { return size_; }
    bool active() const { return size_ > 1 || initialised_; }
    // Rank 0: broadcasts `text` (e.g. an error) to all ranks; others receive it. Collective.
    std::string broadcast(const std::string& text) const;
    // Collective: rank 0 hands out `pending` (ignored elsewhere) to every rank's `workers` threads, rank 0's own
    // included; returns the outcomes in `pending` order on rank 0, nothing elsewhere. `event` is called on rank 0
    // for every cell's start and end, wherever it runs.
    std::vector<CellOutcome> run_cells(const std::vector<int>& pending, int workers, const CellRunner& run,
                                       const CellEvent& event) const;
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

private:
    int rank_ = 0, size_ = 1;
    bool initialised_ = false;
};

// Whether this build has MPI ("OpenMPI 4.1.4" or "" without).
std::string mpi_library_version();

// main() calls this before anything else so that `sweep` can start MPI with the real argc/argv.
void remember_main_arguments(int& argc, char**& argv);
int& main_argc();
char**& main_argv();

}  // namespace rankscope::cli
