#pragma once
// A Kineto-shaped trace generator for the benchmarks (bench_import, bench_ui_paint): one rank's
// torch.profiler Chrome-trace JSON of about `bytes` bytes, in torch.profiler's layout (one event
// per block of lines, args on their own lines) with a DLRM training step's mix: per op a
// cpu_op, its python_function caller, a cudaLaunchKernel, the kernel and the ac2g flow pair;
// per step a ProfilerStep, record_param_comms spans with their NCCL kernels (all-to-all of the
// embeddings, all-reduce of the dense gradients), each kernel launched by a cudaLaunchKernel
// inside its span (same correlation id, an ac2g flow pair), as torch.profiler records them.
// Generator version 2 (version 1 had no launches of the NCCL kernels, so HTA's last-step rule
// dropped them and an imported trace had no communication). Header-only; benchmarks only.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace embedscope::bench {

/// Writes rank `rank` of a `ranks`-rank trace to `path`: events until about `bytes` bytes
/// (1.3 KB an op, 9 ms a step of 400 ops). Throws std::runtime_error when the file cannot be written.
inline void write_kineto_rank(const std::filesystem::path& path, int rank, int ranks, int64_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path.string());
  std::vector<char> buf(1 << 20);
  std::setvbuf(f, buf.data(), _IOFBF, buf.size());
  std::fprintf(f,
               "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\"id\": 0, \"name\": \"NVIDIA H100 80GB "
               "HBM3\", \"totalGlobalMem\": 85031714816}\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": "
               "%d, \"world_size\": %d},\n  \"traceEvents\": [\n",
               rank, ranks);
  static const char* ops[] = {"aten::embedding_bag", "aten::linear", "aten::addmm", "aten::relu", "aten::mul",
                              "aten::sum", "aten::copy_", "aten::cat", "aten::bmm", "aten::sigmoid"};
  static const char* kernels[] = {
      "void fbgemm_gpu::split_embedding_codegen_forward_unweighted_kernel<float, float, 32>(...)",
      "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel",
      "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar>",
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>"};
  const int64_t base = 1'700'000'000'000'000LL + rank * 37;  // us, an epoch-like start as real traces
  int64_t ts = 0, corr = 1, ext = 1, written = 0, step = 0;
  bool first = true;
  auto sep = [&] {
    if (!first) written += std::fprintf(f, ",\n");
    first = false;
  };
  while (written < bytes) {
    const int64_t step_ts = ts;
    sep();
    written += std::fprintf(f,
                            "  {\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%lld\", "
                            "\"pid\": 4242, \"tid\": 4242,\n    \"ts\": %lld.%03d, \"dur\": 9000.5,\n    \"args\": {\n"
                            "      \"External id\": %lld, \"Record function id\": 0\n    }\n  }",
                            static_cast<long long>(step), static_cast<long long>(base + step_ts), 0,
                            static_cast<long long>(ext++));
    for (int i = 0; i < 400 && written < bytes; ++i) {
      const char* op = ops[(i * 7 + step) % 10];
      sep();
      written += std::fprintf(f,
                              "  {\n    \"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"torch/nn/modules/"
                              "module.py(1736): _call_impl\", \"pid\": 4242, \"tid\": 4242,\n    \"ts\": %lld.%03d, "
                              "\"dur\": 21.0,\n    \"args\": {\n      \"Python parent id\": %d, \"Python id\": %d, "
                              "\"Python thread\": 0\n    }\n  },\n",
                              static_cast<long long>(base + ts), i % 1000, i, i + 1);
      written += std::fprintf(f,
                              "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 4242, \"tid\": "
                              "4242,\n    \"ts\": %lld.%03d, \"dur\": 18.250,\n    \"args\": {\n      \"External id\": "
                              "%lld,\"Record function id\": 0, \"Concrete Inputs\": [\"\", \"\", \"\"], \"Input type\": "
                              "[\"float\", \"float\", \"float\"], \"Input Strides\": [[512, 1], [512, 1], []], \"Input "
                              "Dims\": [[2048, 512], [512, 512], [512]], \"Ev Idx\": %d\n    }\n  },\n",
                              op, static_cast<long long>(base + ts + 1), i % 1000, static_cast<long long>(ext), i);
      written += std::fprintf(f,
                              "  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": "
                              "4242, \"tid\": 4242,\n    \"ts\": %lld.%03d, \"dur\": 4.125,\n    \"args\": {\n      "
                              "\"External id\": %lld, \"cbid\": 211, \"correlation\": %lld\n    }\n  },\n",
                              static_cast<long long>(base + ts + 10), i % 1000, static_cast<long long>(ext),
                              static_cast<long long>(corr));
      written += std::fprintf(f,
                              "  {\n    \"ph\": \"s\", \"id\": %lld, \"pid\": 4242, \"tid\": 4242, \"ts\": %lld.%03d,\n    "
                              "\"cat\": \"ac2g\", \"name\": \"ac2g\"\n  },\n",
                              static_cast<long long>(corr), static_cast<long long>(base + ts + 10), i % 1000);
      written += std::fprintf(f,
                              "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7,\n    "
                              "\"ts\": %lld.%03d, \"dur\": 15.5,\n    \"args\": {\n      \"External id\": %lld,\n      "
                              "\"queued\": 0, \"device\": 0, \"context\": 1,\n      \"stream\": 7, \"correlation\": %lld,\n"
                              "      \"registers per thread\": 128,\n      \"shared memory\": 49152,\n      \"blocks per "
                              "SM\": 8.0,\n      \"warps per SM\": 32.0,\n      \"grid\": [256, 1, 1],\n      \"block\": "
                              "[256, 1, 1],\n      \"est. achieved occupancy %%\": 50\n    }\n  },\n",
                              kernels[i % 4], static_cast<long long>(base + ts + 16), i % 1000,
                              static_cast<long long>(ext), static_cast<long long>(corr));
      written += std::fprintf(f,
                              "  {\n    \"ph\": \"f\", \"id\": %lld, \"pid\": 0, \"tid\": 7, \"ts\": %lld.%03d,\n    \"cat\": "
                              "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }",
                              static_cast<long long>(corr), static_cast<long long>(base + ts + 16), i % 1000);
      ++corr;
      ++ext;
      ts += 20;
      if (i % 100 == 99) {  // a collective: record_param_comms and its NCCL kernel
        const bool a2a = i < 200;
        sep();
        written += std::fprintf(
            f,
            "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 4242, \"tid\": "
            "4242,\n    \"ts\": %lld.000, \"dur\": 30.0,\n    \"args\": {\n      \"External id\": %lld,\"Record function "
            "id\": 0, \"Collective name\": \"%s\", \"dtype\": \"Float\", \"In msg nelems\": 1048576, \"Out msg "
            "nelems\": 1048576, \"Group size\": 8, \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Global "
            "rank start\": 0, \"Global rank stride\": 1, \"Process Group Name\": \"0\", \"Process Group Description\": "
            "\"default_pg\", \"Process Group Ranks\": \"[0, 1, 2, 3, 4, 5, 6, 7]\", \"Seq\": %lld\n    }\n  },\n",
            static_cast<long long>(base + ts), static_cast<long long>(ext), a2a ? "all_to_allv" : "allreduce",
            static_cast<long long>(step * 4 + i / 100));
        // its launch inside the span, joined to the kernel by correlation id and an ac2g flow, as
        // torch.profiler records them (without it HTA's last-step rule drops the kernel: no comm)
        written += std::fprintf(f,
                                "  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": "
                                "4242, \"tid\": 4242,\n    \"ts\": %lld.000, \"dur\": 4.125,\n    \"args\": {\n      "
                                "\"External id\": %lld, \"cbid\": 211, \"correlation\": %lld\n    }\n  },\n",
                                static_cast<long long>(base + ts + 5), static_cast<long long>(ext), static_cast<long long>(corr));
        written += std::fprintf(f,
                                "  {\n    \"ph\": \"s\", \"id\": %lld, \"pid\": 4242, \"tid\": 4242, \"ts\": %lld.000,\n    "
                                "\"cat\": \"ac2g\", \"name\": \"ac2g\"\n  },\n",
                                static_cast<long long>(corr), static_cast<long long>(base + ts + 5));
        written += std::fprintf(f,
                                "  {\n    \"ph\": \"f\", \"id\": %lld, \"pid\": 0, \"tid\": 20, \"ts\": %lld.000,\n    \"cat\": "
                                "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  },\n",
                                static_cast<long long>(corr), static_cast<long long>(base + ts + 40));
        written += std::fprintf(f,
                                "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 20,\n    "
                                "\"ts\": %lld.000, \"dur\": 400.0,\n    \"args\": {\n      \"External id\": %lld, "
                                "\"device\": 0, \"stream\": 20, \"correlation\": %lld\n    }\n  }",
                                a2a ? "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
                                    : "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                                static_cast<long long>(base + ts + 40), static_cast<long long>(ext),
                                static_cast<long long>(corr++));
        ++ext;
      }
    }
    ts = step_ts + 9001;
    ++step;
  }
  std::fprintf(f, "\n  ],\n  \"traceName\": \"rank%d.pt.trace.json\"\n}\n", rank);
  if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace embedscope::bench
