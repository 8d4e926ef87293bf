/**
 * Child process of bench section 5 (relay.ts): dynalite with the project table
 * (test/support/dynalite.ts), out of the relay's process as DynamoDB is, so the relay process's
 * memory and event loop measure the relay alone. Reports `{endpoint, tableName}` over IPC, answers `stats` (RSS, CPU time); exits
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
