/**
 * Child process of bench sections 5 (relay.ts) and 6 (idle-lag.ts): dynalite with the project
 * table (test/support/dynalite.ts), out of the measured process as DynamoDB is, so that process's
 * memory and event loop measure the relay (or the flows) alone. Reports `{endpoint, tableName}` over IPC, answers `stats` (RSS, CPU time); exits
 * when the parent disconnects.
 */
import { startTestTable } from "../support/dynalite";

const table = await startTestTable(`bench-relay-${process.pid}`);
process.send?.({ cmd: "ready", endpoint: table.endpoint, tableName: table.tableName });
process.on("message", (message: { cmd: string }) => {
  if (message.cmd !== "stats") return;
  const cpu = process.cpuUsage();
  process.send?.({ cmd: "stats", rss: process.memoryUsage().rss, cpuMs: (cpu.user + cpu.system) / 1000 });
});
process.on("disconnect", () => {
  // Keep-alive sockets can hold the server's close open: exit regardless after a moment.
  setTimeout(() => process.exit(0), 2_000).unref();
  void table.close().finally(() => process.exit(0));
});
