#pragma once
// Small hand-made Nsight Systems SQLite exports for the importer tests, written through
// sqlite3 with the table and column names of Nsight Systems 2024.6 (EXPORT_SCHEMA_VERSION
// 3.16.1), only the columns the importer reads (plus what a test leaves out on purpose).
//
// The capture (times in the export's ns; utcEpochNs 1,700,000,000,000,000,000):
//   process pid 4242 ("trainer"), main thread tid 4242, second thread tid 4250 ("loader")
//   runtime  cudaLaunchKernel  1000..1500  corr 7   tid 4242
//            cudaLaunchKernel  1600..1900  corr 8   tid 4242
//            cudaMemcpyAsync   2100..2200  corr 9   tid 4250
//   kernels  embedding_forward   2000..5000  corr 7  device 0 stream 7   (lookup, computation)
//            ncclDevKernel_AllReduce 4000..9000 corr 8 device 0 stream 13 (comm, communication)
//   memcpy   HtoD (Pageable -> Device) 2300..2800, 4096 bytes, corr 9, stream 7
//   NVTX     ProfilerStep#3 0..10000 push/pop (a step), "step body" 100..9500 push/pop (text),
//            "forward" 200..3000 push/pop (textId -> StringIds), "async region" 500..8000
//            start/end, a mark at 600 (counted, not stored), an unfinished range (end NULL)
//   HTA figures: comp [2000,5000], comm [4000,9000]: overlap 1000 / 5000 = 20 %; kernel time
//   7000 (2000..9000), union 7000 so idle 0; compute 3000; non-compute 4000.

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace embedscope::sessions::testing {

struct NsysFixture {
  bool nvtx = true;                       ///< write NVTX_EVENTS
  std::string schema_version = "3.16.1";  ///< META_DATA_EXPORT EXPORT_SCHEMA_VERSION
  bool kernel_correlation = true;         ///< CUPTI_ACTIVITY_KIND_KERNEL has correlationId
  bool runtime_name = true;               ///< CUPTI_ACTIVITY_KIND_RUNTIME has nameId (required)
  bool negative_kernel = false;           ///< add a kernel row 20000..19000 (end before start)
  int64_t pid = 4242;
  int64_t epoch_ns = 1700000000000000000;
};

/// globalTid / globalPid as Nsight serializes them: hardware / VM id above bit 48, the pid in
/// bits 24..47, the tid in bits 0..23.
inline int64_t nsys_global_id(int64_t pid, int64_t tid) { return (int64_t{1} << 48) | (pid << 24) | tid; }

inline void write_nsys_fixture(const std::string& path, const NsysFixture& f) {
  std::remove(path.c_str());
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("cannot create " + path);
  auto exec = [&](const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string e = err ? err : "?";
      sqlite3_free(err);
      sqlite3_close(db);
      throw std::runtime_error(path + ": " + e + " in " + sql);
    }
  };
  const std::string gpid = std::to_string(nsys_global_id(f.pid, 0));
  const std::string main_tid = std::to_string(nsys_global_id(f.pid, f.pid));
  const std::string loader_tid = std::to_string(nsys_global_id(f.pid, 4250));
  exec("BEGIN");  // one transaction: one sync of the file, not one per statement
  exec("CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);"
       "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems'),"
       "('EXPORT_PRODUCT_VERSION', '2024.6.2.25'), ('EXPORT_SCHEMA_VERSION', '" + f.schema_version + "');"
       "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
       "INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'cudaMemcpyAsync_v3020'),"
       "(3, 'void fbgemm_gpu::embedding_forward_kernel<float>(float *)'), (4, 'embedding_forward_kernel'),"
       "(5, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),"
       "(6, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (7, 'forward'), (8, 'trainer'), (9, 'loader');"
       "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, totalMemory INTEGER);"
       "INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'NVIDIA H100 80GB HBM3', 85520809984);"
       "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);"
       "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" + std::to_string(f.epoch_ns) + ", '', '');"
       "CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);"
       "INSERT INTO PROCESSES VALUES (" + gpid + ", " + std::to_string(f.pid) + ", 'python train.py');"
       "CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);"
       "INSERT INTO ThreadNames VALUES (8, 20, " + main_tid + "), (9, 20, " + loader_tid + ");"
       "CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);"
       "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device');"
       "CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);"
       "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),"
       "(2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');");
  const std::string kcorr = f.kernel_correlation ? "correlationId INTEGER, " : "";
  exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
       " streamId INTEGER NOT NULL, " + kcorr + "globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);");
  auto kernel = [&](int64_t s, int64_t e, int64_t stream, int64_t corr, int name) {
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + std::to_string(s) + ", " + std::to_string(e) + ", 0, " +
         std::to_string(stream) + ", " + (f.kernel_correlation ? std::to_string(corr) + ", " : std::string()) + gpid +
         ", " + std::to_string(name) + ", " + std::to_string(name + 1) + ");");
  };
  kernel(2000, 5000, 7, 7, 3);
  kernel(4000, 9000, 13, 8, 5);
  if (f.negative_kernel) kernel(20000, 19000, 7, 0, 3);
  exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
       " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,"
       " srcKind INTEGER, dstKind INTEGER);"
       "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (2300, 2800, 0, 7, 9, " + gpid + ", 4096, 1, 0, 2);");
  const std::string rname = f.runtime_name ? ", nameId INTEGER NOT NULL" : "";
  exec("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER,"
       " correlationId INTEGER" + rname + ");");
  auto call = [&](int64_t s, int64_t e, int64_t corr, int name, const std::string& tid) {
    exec("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (" + std::to_string(s) + ", " + std::to_string(e) + ", " + tid +
         ", " + std::to_string(corr) + (f.runtime_name ? ", " + std::to_string(name) : std::string()) + ");");
  };
  call(1000, 1500, 7, 1, main_tid);
  call(1600, 1900, 8, 1, main_tid);
  call(2100, 2200, 9, 2, loader_tid);
  if (f.nvtx) {
    exec("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
         " text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);"
         "INSERT INTO NVTX_EVENTS VALUES (0, 10000, 59, NULL, 'ProfilerStep#3', " + main_tid + ", NULL, NULL, 0),"
         "(100, 9500, 59, NULL, 'step body', " + main_tid + ", NULL, NULL, 0),"
         "(200, 3000, 59, NULL, NULL, " + main_tid + ", NULL, 7, 0),"
         "(500, 8000, 60, 1, 'async region', " + main_tid + ", " + loader_tid + ", NULL, 0),"
         "(600, NULL, 34, NULL, 'a mark', " + main_tid + ", NULL, NULL, 0),"
         "(700, NULL, 59, NULL, 'never popped', " + main_tid + ", NULL, NULL, 0);");
  }
  exec("COMMIT");
  sqlite3_close(db);
}

}  // namespace embedscope::sessions::testing
