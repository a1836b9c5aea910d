// Local worker threads and the MPI work queue of `rankscope sweep` (sweep_scheduler.hpp).
//
// MPI protocol (tags): a rank with a free worker sends kRequest (no payload) to rank 0 and waits for kAssign (one int:
// the cell index, or -1 = no more cells); when a cell ends it sends kOutcome (a JSON string). Rank 0 serves requests
// and outcomes from its main thread between polls of its own workers (MPI is called from main threads only:
// MPI_THREAD_FUNNELED), and stops once every cell is done and every other rank has been told -1.
#include "sweep_scheduler.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "rankscope/error.hpp"
#include "rankscope/process.hpp"

#ifdef RANKSCOPE_WITH_MPI
#include <mpi.h>
#endif

namespace rankscope::cli {
namespace {

// What an interrupted sweep says after "interrupted by SIGTERM": it named the program a cell ran.
constexpr const char* kInterruptedWhere = "sweep: the cells done are kept, and the same command resumes";

int g_argc = 0;
char** g_argv = nullptr;

// A pool of worker threads taking cell indices from a shared source and reporting outcomes to a queue read by the
// calling (main) thread.
class WorkerPool {
public:
    // `next` returns the next index or -1; the workers call it concurrently, so it must be thread-safe.
    WorkerPool(int workers, CellRunner run, std::function<int()> next) : run_(std::move(run)), next_(std::move(next)) {
        for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
    }
    ~WorkerPool() { join(); }
    void join() {
        for (auto& thread : threads_)
            if (thread.joinable()) thread.join();
    }
    // Outcomes and starts since the last call.
    struct Event {
        int index;
        bool finished;
        CellOutcome outcome;
    };
    std::vector<Event> take_events() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<Event> out(events_.begin(), events_.end());
        events_.clear();
        return out;
    }
    bool all_stopped() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stopped_ == static_cast<int>(threads_.size());
    }
    std::exception_ptr error() {
        std::lock_guard<std::mutex> lock(mutex_);
        return error_;
    }

private:
    void work() {
        while (true) {
            bool stop = false;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                stop = error_ || pending_interrupt() != 0;
            }
            const int index = stop ? -1 : next_();  // may block (MPI ranks wait for rank 0): outside the lock
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (index < 0) {
                    ++stopped_;
                    return;
                }
                events_.push_back({index, false, {}});
            }
            try {
                CellOutcome outcome = run_(index);
                std::lock_guard<std::mutex> lock(mutex_);
                events_.push_back({index, true, std::move(outcome)});
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex_);
                if (!error_) error_ = std::current_exception();
            }
        }
    }
    CellRunner run_;
    std::function<int()> next_;
    std::vector<std::thread> threads_;
    std::mutex mutex_;
    std::deque<Event> events_;
    int stopped_ = 0;
    std::exception_ptr error_;
};

// Outcomes in `pending` order.
std::vector<CellOutcome> in_pending_order(const std::vector<int>& pending, const std::vector<CellOutcome>& outcomes) {
    std::vector<CellOutcome> ordered;
    for (int index : pending)
        for (const auto& outcome : outcomes)
            if (outcome.index == index) {
                ordered.push_back(outcome);
                break;
            }
    return ordered;
}

bool launched_by_mpi() {
    for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"})
        if (std::getenv(variable) != nullptr) return true;
    return false;
}

}  // namespace

void remember_main_arguments(int& argc, char**& argv) {
    g_argc = argc;
    g_argv = argv;
}
int& main_argc() { return g_argc; }
char**& main_argv() { return g_argv; }

std::vector<CellOutcome> run_cells_locally(const std::vector<int>& pending, int workers, const CellRunner& run,
                                           const CellEvent& event) {
    std::mutex mutex;
    std::size_t next = 0;
    WorkerPool pool(workers, run, [&]() {
        std::lock_guard<std::mutex> lock(mutex);
        return next < pending.size() ? pending[next++] : -1;
    });
    std::vector<CellOutcome> outcomes;
    while (true) {
        const bool stopped = pool.all_stopped();  // read before the events, so none is missed
        for (const auto& item : pool.take_events()) {
            if (item.finished) outcomes.push_back(item.outcome);
            event(item.index, item.finished ? &item.outcome : nullptr);
        }
        if (stopped) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pool.join();
    // A signal first: the workers' cells stopped with it, and their error named the program they ran.
    if (pending_interrupt() != 0) throw Interrupted(pending_interrupt(), kInterruptedWhere);
    if (auto error = pool.error()) std::rethrow_exception(error);
    return in_pending_order(pending, outcomes);
}

#ifdef RANKSCOPE_WITH_MPI

namespace {
// A cell's outcome as the workers send it to rank 0.
nlohmann::json outcome_json(const CellOutcome& outcome) {
    return {{"index", outcome.index}, {"ok", outcome.ok}, {"seconds", outcome.seconds}, {"error", outcome.error},
            {"rank", outcome.rank}};
}
CellOutcome outcome_from_json(const nlohmann::json& json) {
    CellOutcome outcome;
    outcome.index = json.at("index").get<int>();
    outcome.ok = json.at("ok").get<bool>();
    outcome.seconds = json.at("seconds").get<double>();
    outcome.error = json.at("error").get<std::string>();
    outcome.rank = json.at("rank").get<int>();
    return outcome;
}

constexpr int kRequest = 1, kAssign = 2, kOutcome = 3;

void send_string(const std::string& text, int destination, int tag) {
    MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, destination, tag, MPI_COMM_WORLD);
}
std::string receive_string(int source, int tag, MPI_Status* status_out = nullptr) {
    MPI_Status status;
    MPI_Probe(source, tag, MPI_COMM_WORLD, &status);
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string text(static_cast<std::size_t>(count), '\0');
    MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (status_out) *status_out = status;
    return text;
}
}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
    if (!launched_by_mpi()) return;
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed");
    initialised_ = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
    if (initialised_) MPI_Finalize();
}

std::string MpiSession::broadcast(const std::string& text) const {
    if (!initialised_) return text;
    int length = rank_ == 0 ? static_cast<int>(text.size()) : 0;
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string out = rank_ == 0 ? text : std::string(static_cast<std::size_t>(length), '\0');
    MPI_Bcast(out.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    return out;
}

std::vector<CellOutcome> MpiSession::run_cells(const std::vector<int>& pending, int workers, const CellRunner& run,
                                               const CellEvent& event) const {
    if (!initialised_) return run_cells_locally(pending, workers, run, event);
    const int rank = rank_;
    auto run_here = [&run, rank](int index) {
        CellOutcome outcome = run(index);
        outcome.rank = rank;
        return outcome;
    };
    if (rank_ == 0) {
        std::mutex mutex;  // guards `next` (workers and the main thread both hand out cells)
        std::size_t next = 0;
        auto take = [&]() {
            std::lock_guard<std::mutex> lock(mutex);
            return next < pending.size() && pending_interrupt() == 0 ? pending[next++] : -1;
        };
        WorkerPool pool(workers, run_here, take);
        std::vector<CellOutcome> outcomes;
        int remote_running = 0, ranks_told_to_stop = 0;
        bool local_done = false;
        while (!(local_done && remote_running == 0 && ranks_told_to_stop == size_ - 1)) {
            bool busy = false;
            int flag = 0;
            MPI_Status status;
            MPI_Iprobe(MPI_ANY_SOURCE, kRequest, MPI_COMM_WORLD, &flag, &status);
            if (flag) {
                busy = true;
                MPI_Recv(nullptr, 0, MPI_INT, status.MPI_SOURCE, kRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                int index = take();
                MPI_Send(&index, 1, MPI_INT, status.MPI_SOURCE, kAssign, MPI_COMM_WORLD);
                if (index >= 0) ++remote_running, event(index, nullptr);
                else ++ranks_told_to_stop;
            }
            MPI_Iprobe(MPI_ANY_SOURCE, kOutcome, MPI_COMM_WORLD, &flag, &status);
            if (flag) {
                busy = true;
                const CellOutcome outcome = outcome_from_json(nlohmann::json::parse(receive_string(status.MPI_SOURCE, kOutcome)));
                --remote_running;
                outcomes.push_back(outcome);
                event(outcome.index, &outcome);
            }
            const bool stopped = pool.all_stopped();
            for (const auto& item : pool.take_events()) {
                if (item.finished) outcomes.push_back(item.outcome);
                event(item.index, item.finished ? &item.outcome : nullptr);
            }
            local_done = stopped;
            if (local_done && pending_interrupt() != 0) break;  // mpirun forwards the signal to every rank
            if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        pool.join();
        if (pending_interrupt() != 0) throw Interrupted(pending_interrupt(), kInterruptedWhere);
        if (auto error = pool.error()) std::rethrow_exception(error);
        return in_pending_order(pending, outcomes);
    }
    // Other ranks: each free worker slot asks rank 0 for a cell; outcomes go back as they come.
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<int> assigned;
    bool no_more = false;
    int waiting = 0;  // workers waiting for an assignment
    auto take = [&]() {
        // Called by a worker: wait for the main thread to fetch an index from rank 0.
        std::unique_lock<std::mutex> lock(mutex);
        ++waiting;
        wake.wait(lock, [&] { return !assigned.empty() || no_more; });
        --waiting;
        if (assigned.empty()) return -1;
        const int index = assigned.front();
        assigned.pop_front();
        return index;
    };
    WorkerPool pool(workers, run_here, take);
    auto send_outcomes = [&] {
        for (const auto& item : pool.take_events())
            if (item.finished) send_string(outcome_json(item.outcome).dump(), 0, kOutcome);
    };
    while (true) {
        const bool stopped = pool.all_stopped();
        send_outcomes();
        if (stopped) break;
        bool ask = false;
        {
            std::lock_guard<std::mutex> lock(mutex);
            ask = !no_more && waiting > static_cast<int>(assigned.size());
        }
        if (ask) {
            MPI_Send(nullptr, 0, MPI_INT, 0, kRequest, MPI_COMM_WORLD);
            int index = -1;
            MPI_Recv(&index, 1, MPI_INT, 0, kAssign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            {
                std::lock_guard<std::mutex> lock(mutex);
                if (index >= 0) assigned.push_back(index);
                else no_more = true;
            }
            wake.notify_all();
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    pool.join();
    if (auto error = pool.error()) std::rethrow_exception(error);
    return {};
}

std::string mpi_library_version() {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, static_cast<std::size_t>(length));
    const auto comma = text.find(',');
    return comma == std::string::npos ? text : text.substr(0, comma);
}

#else  // without MPI

MpiSession::MpiSession(int&, char**&) {
    if (launched_by_mpi() && std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr && std::string(std::getenv("OMPI_COMM_WORLD_SIZE")) != "1")
        throw Error("this rankscope was built without MPI (configure with -DRANKSCOPE_MPI=ON and libopenmpi-dev), but runs "
                    "under an MPI launcher: every rank would run the whole sweep");
}
MpiSession::~MpiSession() = default;
std::string MpiSession::broadcast(const std::string& text) const { return text; }
std::vector<CellOutcome> MpiSession::run_cells(const std::vector<int>& pending, int workers, const CellRunner& run,
                                               const CellEvent& event) const {
    return run_cells_locally(pending, workers, run, event);
}
std::string mpi_library_version() { return ""; }

#endif

}  // namespace rankscope::cli
