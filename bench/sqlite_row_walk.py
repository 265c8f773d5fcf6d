#!/usr/bin/env python3
"""The anchor of bench/nsys_scale_benchmark.sh: Python's own sqlite3 (as nsys
recipes and nsys-ai read exports) walking the rows gputriage reads from an
Nsight Systems export, keeping nothing and judging nothing.

    sqlite_row_walk.py EXPORT.sqlite
"""
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?immutable=1", uri=True)
tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
queries = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, k.globalPid, s.value, "
                                  "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread, "
                                  "k.staticSharedMemory, k.dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                  "LEFT JOIN StringIds s ON s.id = k.demangledName",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind "
                                  "FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET": "SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes "
                                  "FROM CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "SELECT start, end, deviceId, streamId, syncType, globalPid "
                                           "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "SELECT r.start, r.end, r.globalTid, r.correlationId, s.value "
                                   "FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId",
    "NVTX_EVENTS": "SELECT start, end, globalTid, text FROM NVTX_EVENTS",
    "OSRT_API": "SELECT o.start, o.end, o.globalTid, s.value, o.nestingLevel FROM OSRT_API o "
                "LEFT JOIN StringIds s ON s.id = o.nameId",
    "COMPOSITE_EVENTS": "SELECT c.start, c.globalTid, c.threadState, sym.value, mod.value FROM COMPOSITE_EVENTS c "
                        "LEFT JOIN SAMPLING_CALLCHAINS s ON s.id = c.id AND s.stackDepth = 0 "
                        "LEFT JOIN StringIds sym ON sym.id = s.symbol LEFT JOIN StringIds mod ON mod.id = s.module",
}
rows = 0
for table, sql in queries.items():
    if table in tables:
        for _ in db.execute(sql):
            rows += 1
print(rows)
