// Load generator for bench.store: keeps N GetCanvas or UpdateCanvas calls in flight on one channel.
//
// Why native: the load client is only the harness, yet it shares the machine's two cores with the store, and
// grpc-python's cheapest client costs about half as much CPU per call as the store itself. One thread drives
// every call through a completion queue (no callback threads, no hand-offs), the cheapest gRPC client form.
//
//   store_load <host:port> <token> get|update <concurrency>
//
// Protocol on stdin/stdout, one line each, so bench.store can alternate it with the raw side:
//   first:  canvas ids, one per line, for get (each worker cycles through its share); "id etag", one line per
//           worker, for update (each worker owns one canvas and carries its etag from reply to request);
//           then an empty line. It answers "ready" once every worker's first call has succeeded.
//   then:   "<seconds>" runs one slice and answers "<completed calls> <elapsed seconds>".
//   End of input ends the process. A failed call answers "error <code> <message>" and exits 1.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "agentcanvas/v1/canvas_store.grpc.pb.h"

namespace pb = agentcanvas::v1;
using Clock = std::chrono::steady_clock;

namespace {

class Worker {
 public:
  Worker(pb::CanvasStore::Stub* stub, grpc::CompletionQueue* queue, const std::string& authorization, bool update,
         const std::vector<std::string>* ids, size_t first, size_t stride, std::string etag)
      : stub_(stub), queue_(queue), authorization_(authorization), update_(update), ids_(ids), next_(first),
        stride_(stride), etag_(std::move(etag)) {
    if (update_) update_request_.mutable_update_mask()->add_paths("description");
  }

  void Issue() {
    id_ = &(*ids_)[next_];
    if (!update_) next_ = (next_ + stride_) % ids_->size();
    context_ = std::make_unique<grpc::ClientContext>();
    context_->AddMetadata("authorization", authorization_);
    if (update_) {
      pb::Canvas* canvas = update_request_.mutable_canvas();
      canvas->set_id(*id_);
      canvas->set_etag(etag_);
      canvas->set_description("d" + std::to_string(Clock::now().time_since_epoch().count()));
      reader_ = stub_->AsyncUpdateCanvas(context_.get(), update_request_, queue_);
    } else {
      get_request_.set_id(*id_);
      reader_ = stub_->AsyncGetCanvas(context_.get(), get_request_, queue_);
    }
    reader_->Finish(&reply_, &status_, this);
  }

  // The call this worker issued has completed; an empty string when it succeeded.
  std::string Outcome() {
    if (!status_.ok()) return std::to_string(status_.error_code()) + " " + status_.error_message();
    if (reply_.id() != *id_) return "2 reply for canvas " + reply_.id() + " to a call for " + *id_;
    if (update_) etag_ = reply_.etag();
    return "";
  }

 private:
  pb::CanvasStore::Stub* stub_;
  grpc::CompletionQueue* queue_;
  const std::string& authorization_;
  bool update_;
  const std::vector<std::string>* ids_;
  size_t next_;
  size_t stride_;
  const std::string* id_ = nullptr;
  std::string etag_;
  std::unique_ptr<grpc::ClientContext> context_;
  pb::GetCanvasRequest get_request_;
  pb::UpdateCanvasRequest update_request_;
  pb::Canvas reply_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::Canvas>> reader_;
};

class Load {
 public:
  Load(pb::CanvasStore::Stub* stub, const std::string& token, bool update, const std::vector<std::string>& lines,
       int concurrency)
      : authorization_("Bearer " + token) {
    std::vector<std::string> etags;
    for (const auto& line : lines) {
      std::istringstream fields(line);
      std::string id, etag;
      fields >> id >> etag;
      ids_.push_back(id);
      etags.push_back(etag);
    }
    for (int index = 0; index < concurrency; ++index) {
      size_t first = index % ids_.size();
      workers_.push_back(std::make_unique<Worker>(stub, &queue_, authorization_, update, &ids_, first, concurrency,
                                                  etags[first]));
    }
  }

  ~Load() {
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  // Keeps every worker's calls going until `seconds` have passed, then lets the calls in flight finish.
  // Returns false, with the first failure in `failure`, when a call failed.
  bool Run(double seconds, long* completed, double* elapsed, std::string* failure) {
    const auto started = Clock::now();
    const auto stop = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    *completed = 0;
    failure->clear();
    for (auto& worker : workers_) worker->Issue();
    for (size_t active = workers_.size(); active > 0;) {
      void* tag;
      bool ok;
      if (!queue_.Next(&tag, &ok)) break;
      auto* worker = static_cast<Worker*>(tag);
      std::string outcome = worker->Outcome();
      if (outcome.empty()) {
        ++*completed;
        if (failure->empty() && Clock::now() < stop) {
          worker->Issue();
          continue;
        }
      } else if (failure->empty()) {
        *failure = outcome;
      }
      --active;
    }
    *elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    return failure->empty();
  }

 private:
  std::string authorization_;
  grpc::CompletionQueue queue_;
  std::vector<std::string> ids_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <host:port> <token> get|update <concurrency>\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1], token = argv[2], op = argv[3];
  const int concurrency = std::atoi(argv[4]);
  if ((op != "get" && op != "update") || concurrency < 1) {
    std::fprintf(stderr, "op must be get or update, and concurrency at least 1\n");
    return 2;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(std::cin, line) && !line.empty();) lines.push_back(line);
  if (lines.empty() || (op == "update" && lines.size() < static_cast<size_t>(concurrency))) {
    std::fprintf(stderr, "stdin needs canvas ids (get) or one \"id etag\" line per worker (update)\n");
    return 2;
  }
  auto stub = pb::CanvasStore::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  Load load(stub.get(), token, op == "update", lines, concurrency);

  long completed = 0;
  double elapsed = 0;
  std::string failure;
  if (!load.Run(0, &completed, &elapsed, &failure)) {  // one call per worker: connects and checks the token
    std::cout << "error " << failure << std::endl;
    return 1;
  }
  std::cout << "ready" << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    if (!load.Run(std::stod(line), &completed, &elapsed, &failure)) {
      std::cout << "error " << failure << std::endl;
      return 1;
    }
    std::cout << completed << " " << elapsed << std::endl;
  }
  return 0;
}
