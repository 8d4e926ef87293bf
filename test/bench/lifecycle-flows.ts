/**
 * Section 4: lifecycle flows. Control-plane overhead of first connect -> running and
 * paused -> running on a zero-latency provider, and the AWS calls (DynamoDB, Step Functions
 * state transitions, Lambda invocations, EventBridge Scheduler, WebSocket pushes) each step of a
 * session lifecycle makes, with a list-price cost per 1,000 lifecycles.
 *
 * Runs the flow test harness (test/support/flow-harness.ts): dynalite, the real ASL files run by
 * the local flow runner with the real step functions, the instant provider and a scripted agent.
 * Import this module only after the environment is set (it loads the runtime). Alone:
 *   POWERTOOLS_LOG_LEVEL=SILENT POWERTOOLS_METRICS_DISABLED=true \
 *     npx tsx -e 'import("./test/bench/lifecycle-flows.ts").then((m) => m.benchLifecycleFlows())'
 */
import type { StateMachine } from "aws-local-stepfunctions";
import type { SessionStatus } from "../../functions/domain/session";
import type { FlowName } from "../../functions/ports/flow-runner";
import { scheduleName } from "../../functions/ports/lifecycle-scheduler";
import { startFlowHarness, type FlowHarness } from "../support/flow-harness";
import { InstantSandboxProvider } from "../support/instant-provider";
import { ScriptedAgent } from "../support/scripted-agent";
import { countDynamoRequests, dynamoCostNotes, USD_PER_RRU, USD_PER_WRU } from "./dynamo-usage";
import { heading, mean, ms, note, percentile, table } from "./report";

const N = 200;
const WARM_UP = 20;

/** us-east-1 list prices (assumptions, see the printed notes). */
const USD_PER_STATE_TRANSITION = 0.025 / 1000;
const USD_PER_LAMBDA_REQUEST = 0.2 / 1_000_000;
const USD_PER_LAMBDA_GB_SECOND_ARM = 0.0000133334;
const LAMBDA_MEMORY_GB = 512 / 1024;
const USD_PER_SCHEDULED_INVOCATION = 1 / 1_000_000;
const USD_PER_WEBSOCKET_MESSAGE = 1 / 1_000_000;
/** SQS standard queue requests (the relay nudges, issue 15): $0.40 per million, the first million a month free ignored. */
const USD_PER_SQS_REQUEST = 0.4 / 1_000_000;
const WEBSOCKET_MESSAGE_UNIT_BYTES = 32 * 1024;

/** The figures of issue 15, measured at dd49683 with this section: printed beside today's. */
const BEFORE_ISSUE_15 = {
  dynamoRequests: 52,
  dynamoMix: "GetItem×25, Query×10, UpdateItem×12, PutItem×5",
  transitions: 25,
  usdPer1000: 0.7,
  stepFunctionsShare: 89,
};

/**
 * The figures before issue 15's last pass (one read for the org's limits and model, Finish reusing
 * Begin's connection listing and skipping the queue of a session that never had a prompt, create in
 * one batch write), measured at ef404c3: printed beside today's.
 */
const BEFORE_LAST_PASS = { commit: "ef404c3", dynamoRequests: 34, transitions: 9, usdPer1000: 0.31694 };

/** What one lifecycle step cost, summed over the measured sessions. */
class Usage {
  dynamo = new Map<string, number>();
  rru = 0;
  wru = 0;
  gsiKeyMoves = 0;
  executions = 0;
  failedExecutions = 0;
  /** States entered, by state type (Task, Pass, Choice...). */
  states = new Map<string, number>();
  retries = 0;
  lambdaInvocations = 0;
  /** Sum of the invocations' durations rounded up to 1 ms, as Lambda bills. */
  lambdaBilledMs = 0;
  /** StartExecution calls made by steps or schedules (flows starting flows), besides the API's own. */
  chainedStarts = 0;
  arms = 0;
  cancels = 0;
  /** EventBridge Scheduler API requests the AWS adapter would send (Create, or Create + Update on re-arm; Delete). */
  schedulerApiCalls = 0;
  pushes = 0;
  /** Relay nudges sent (SendMessage to the nudge queue; DynamoDB PutItem before issue 15's SQS change). */
  nudges = 0;
  /** WebSocket messages as API Gateway bills them (32 KB units). */
  pushUnits = 0;
  unexpected = new Map<string, number>();

  bump(map: Map<string, number>, key: string, by = 1): void {
    map.set(key, (map.get(key) ?? 0) + by);
  }
  /** Standard workflows bill every state entered, and every retry of one. */
  get transitions(): number {
    return [...this.states.values()].reduce((a, b) => a + b, 0) + this.retries;
  }
  /** Dollars, for all the sessions this usage covers. */
  cost(): { dynamo: number; stepFunctions: number; lambdaRequests: number; lambdaDuration: number; scheduler: number; websocket: number; sqs: number; total: number } {
    const c = {
      dynamo: this.rru * USD_PER_RRU + this.wru * USD_PER_WRU,
      stepFunctions: this.transitions * USD_PER_STATE_TRANSITION,
      lambdaRequests: this.lambdaInvocations * USD_PER_LAMBDA_REQUEST,
      lambdaDuration: (this.lambdaBilledMs / 1000) * LAMBDA_MEMORY_GB * USD_PER_LAMBDA_GB_SECOND_ARM,
      // Schedules armed in a lifecycle are cancelled by its end: none fires (see the notes).
      scheduler: 0 * USD_PER_SCHEDULED_INVOCATION,
      websocket: this.pushUnits * USD_PER_WEBSOCKET_MESSAGE,
      // Each nudge is one SendMessage here and, on the relays' side, about one ReceiveMessage and one DeleteMessage.
      sqs: this.nudges * 3 * USD_PER_SQS_REQUEST,
    };
    return { ...c, total: Object.values(c).reduce((a, b) => a + b, 0) };
  }
  add(other: Usage): void {
    for (const [k, v] of other.dynamo) this.bump(this.dynamo, k, v);
    for (const [k, v] of other.states) this.bump(this.states, k, v);
    for (const [k, v] of other.unexpected) this.bump(this.unexpected, k, v);
    this.rru += other.rru;
    this.wru += other.wru;
    this.gsiKeyMoves += other.gsiKeyMoves;
    this.executions += other.executions;
    this.failedExecutions += other.failedExecutions;
    this.retries += other.retries;
    this.lambdaInvocations += other.lambdaInvocations;
    this.lambdaBilledMs += other.lambdaBilledMs;
    this.chainedStarts += other.chainedStarts;
    this.arms += other.arms;
    this.cancels += other.cancels;
    this.schedulerApiCalls += other.schedulerApiCalls;
    this.pushes += other.pushes;
    this.nudges += other.nudges;
    this.pushUnits += other.pushUnits;
  }
}

/** Where the probes record: the step being measured, or nowhere (warm-up, set-up). */
interface Probe {
  active: Usage | null;
  /** Event-log readers still draining (an execution's log can end a tick after its result). */
  draining: Set<Promise<void>>;
}

type Run = StateMachine["run"];
type TaskHandler = (input: unknown) => Promise<unknown>;
interface LoggedEvent {
  type: string;
  state?: { type: string };
}

/**
 * Observes every execution of the runner's state machines (a private field of the local runner:
 * a benchmark probe, not an API): reads the execution's event log for the states entered and
 * retried, and wraps the Task handlers the runner binds (each call is one Lambda invocation in AWS,
 * a retry included) to count and time them. Returns false when the machines cannot be reached.
 */
function probeStateMachines(h: FlowHarness, probe: Probe): boolean {
  const machines = (h.runner as unknown as { machines?: Map<FlowName, StateMachine> }).machines;
  if (!(machines instanceof Map) || machines.size === 0) return false;
  for (const machine of machines.values()) {
    const run = machine.run.bind(machine);
    machine.run = ((input, options) => {
      const usage = probe.active;
      const handlers = (options?.overrides?.taskResourceLocalHandlers ?? {}) as Record<string, TaskHandler>;
      const timed = Object.fromEntries(
        Object.entries(handlers).map(([state, handler]) => [
          state,
          async (event: unknown) => {
            const started = performance.now();
            try {
              return await handler(event);
            } finally {
              if (usage) {
                usage.lambdaInvocations += 1;
                usage.lambdaBilledMs += Math.max(1, Math.ceil(performance.now() - started));
              }
            }
          },
        ]),
      );
      const execution = run(input, { ...options, overrides: { ...options?.overrides, taskResourceLocalHandlers: timed as never } });
      if (usage) usage.executions += 1;
      const drain = (async () => {
        for await (const event of execution.eventLogs as AsyncGenerator<LoggedEvent>) {
          if (!usage) continue;
          if (event.type === "StateEntered") usage.bump(usage.states, event.state?.type ?? "?");
          else if (event.type === "StateRetried") usage.retries += 1;
          else if (event.type === "ExecutionFailed") usage.failedExecutions += 1;
        }
      })();
      probe.draining.add(drain);
      void drain.finally(() => probe.draining.delete(drain));
      return execution;
    }) as Run;
  }
  return true;
}

/** Counts schedules, pushes and chained flow starts by wrapping the ports on `deps` (step factories read deps at execution start). */
function probePorts(h: FlowHarness, probe: Probe): void {
  const { scheduler, push, flows } = h.deps;
  h.deps.scheduler = {
    arm: (target, at) => {
      if (probe.active) {
        probe.active.arms += 1;
        // The AWS adapter tries CreateSchedule; on ConflictException (the name exists) it sends UpdateSchedule.
        const exists = h.scheduler.pending().some((p) => p.name === scheduleName(target));
        probe.active.schedulerApiCalls += exists ? 2 : 1;
      }
      return scheduler.arm(target, at);
    },
    cancel: (target) => {
      if (probe.active) {
        probe.active.cancels += 1;
        probe.active.schedulerApiCalls += 1; // DeleteSchedule (ResourceNotFound when none is armed)
      }
      return scheduler.cancel(target);
    },
  };
  h.deps.push = {
    send: (connectionId, message) => {
      if (probe.active) {
        probe.active.pushes += 1;
        probe.active.pushUnits += Math.max(1, Math.ceil(Buffer.byteLength(JSON.stringify(message)) / WEBSOCKET_MESSAGE_UNIT_BYTES));
      }
      return push.send(connectionId, message);
    },
    disconnect: (connectionId) => push.disconnect(connectionId),
  };
  const nudge = h.deps.relayNudge;
  if (nudge) {
    h.deps.relayNudge = {
      nudge: (sessionId) => {
        if (probe.active) probe.active.nudges += 1;
        return nudge.nudge(sessionId);
      },
    };
  }
  h.deps.flows = {
    start: (input) => {
      if (probe.active) probe.active.chainedStarts += 1;
      return flows.start(input);
    },
  };
}

interface Step {
  label: string;
  flow: FlowName | null;
  expect: SessionStatus;
  usage: Usage;
  latencies: number[];
}

/** Starts `flow` as the API does (lease read, then StartExecution) and waits for that execution; returns its duration. */
async function timedFlow(h: FlowHarness, probe: Probe, flow: FlowName, sessionId: string): Promise<number> {
  const started = performance.now();
  const { executionName } = await h.start(flow, sessionId, "bench");
  await h.runner.executions.get(executionName)?.done;
  const elapsed = performance.now() - started;
  // Anything the flow set off (chained flows) belongs to this step; then let the event logs drain.
  await h.runner.whenIdle();
  while (probe.draining.size > 0) await Promise.all([...probe.draining]);
  return elapsed;
}

function perSession(map: Map<string, number>, n: number): string {
  if (map.size === 0) return "-";
  return [...map.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}×${+(v / n).toFixed(2)}`)
    .join(", ");
}

function num(value: number, digits = 2): string {
  return String(+value.toFixed(digits));
}

function usd(value: number): string {
  return `$${value.toFixed(5)}`;
}

export async function benchLifecycleFlows(): Promise<void> {
  heading(`4. Lifecycle flows (local flow runner: real ASL + step functions → dynalite, zero-latency provider)`);
  const startedAt = performance.now();
  const provider = new InstantSandboxProvider();
  const h = await startFlowHarness({ provider, agent: new ScriptedAgent() });
  note(`flow harness started in ${(performance.now() - startedAt).toFixed(0)} ms; provider: instant (native pause), agent: scripted`);
  try {
    const probe: Probe = { active: null, draining: new Set() };
    const dynamoProbed = countDynamoRequests(h.table.doc, (r) => {
      const usage = probe.active;
      if (!usage) return;
      usage.bump(usage.dynamo, r.op);
      usage.rru += r.rru;
      usage.wru += r.wru;
      usage.gsiKeyMoves += r.gsiKeyMoves;
    });
    if (!dynamoProbed) note("! could not wrap the table's document client: DynamoDB counts below are missing");
    const machinesProbed = probeStateMachines(h, probe);
    if (!machinesProbed) note("! could not reach the runner's state machines: transitions and Lambda counts below are missing");
    probePorts(h, probe);

    const steps: Step[] = [
      { label: "create session record (API)", flow: null, expect: "starting", usage: new Usage(), latencies: [] },
      { label: "first connect → running (ensure-runtime)", flow: "ensure-runtime", expect: "running", usage: new Usage(), latencies: [] },
      { label: "running → paused (pause)", flow: "pause", expect: "paused", usage: new Usage(), latencies: [] },
      { label: "paused → running (ensure-runtime)", flow: "ensure-runtime", expect: "running", usage: new Usage(), latencies: [] },
      { label: "running → stopped (stop)", flow: "stop", expect: "stopped", usage: new Usage(), latencies: [] },
    ];

    const measuredStarted = { at: 0 };
    for (let i = 0; i < WARM_UP + N; i++) {
      const measured = i >= WARM_UP;
      if (i === WARM_UP) measuredStarted.at = performance.now();
      let sessionId = "";
      for (const step of steps) {
        probe.active = measured ? step.usage : null;
        let elapsed: number;
        if (step.flow === null) {
          const t = performance.now();
          sessionId = (await h.createSession()).id;
          elapsed = performance.now() - t;
          // One connected client (the WebSocket $connect handler's write, not counted), so the flows' pushes are real.
          probe.active = null;
          await h.addClient(sessionId);
        } else {
          elapsed = await timedFlow(h, probe, step.flow, sessionId);
        }
        probe.active = null;
        if (!measured) continue;
        step.latencies.push(elapsed);
        const status = (await h.session(sessionId)).status;
        if (status !== step.expect) step.usage.bump(step.usage.unexpected, status);
      }
    }
    const measuredMs = performance.now() - measuredStarted.at;
    const total = new Usage();
    for (const step of steps) total.add(step.usage);
    note(`${N} sessions measured after ${WARM_UP} warm-up lifecycles, sequentially, one connected client each (${(measuredMs / 1000).toFixed(1)} s)`);

    console.log("\n   a) Control-plane overhead per flow: from the API's lease read + StartExecution until the execution ends");
    table(
      ["step", "n", "p50", "p99", "mean", "max", "unexpected end status"],
      steps
        .filter((s) => s.flow !== null)
        .map((s) => [
          s.label,
          s.latencies.length,
          ms(percentile(s.latencies, 50)),
          ms(percentile(s.latencies, 99)),
          ms(mean(s.latencies)),
          ms(Math.max(...s.latencies)),
          s.usage.unexpected.size || s.usage.failedExecutions ? `${perSession(s.usage.unexpected, 1)}; failed executions ${s.usage.failedExecutions}` : "none",
        ]),
    );

    const rows = [...steps.map((s) => ({ label: s.label, usage: s.usage })), { label: "total per lifecycle", usage: total }];

    console.log("\n   b) DynamoDB requests per session (measured on the table's document client)");
    table(
      ["step", "requests / session", "RRU", "WRU", "GSI key moves"],
      rows.map(({ label, usage }) => [label, perSession(usage.dynamo, N), num(usage.rru / N), num(usage.wru / N), num(usage.gsiKeyMoves / N)]),
    );

    console.log("\n   c) Step Functions, Lambda, EventBridge Scheduler and WebSocket calls per session");
    table(
      ["step", "executions", "transitions", "states entered", "retries", "Lambda inv.", "billed ms / inv.", "arm / cancel", "Scheduler API", "pushes", "SQS nudges"],
      rows.map(({ label, usage }) => [
        label,
        num(usage.executions / N),
        num(usage.transitions / N),
        perSession(usage.states, N),
        num(usage.retries / N),
        num(usage.lambdaInvocations / N),
        usage.lambdaInvocations ? num(usage.lambdaBilledMs / usage.lambdaInvocations) : "-",
        `${num(usage.arms / N)} / ${num(usage.cancels / N)}`,
        num(usage.schedulerApiCalls / N),
        num(usage.pushes / N),
        num(usage.nudges / N),
      ]),
    );

    console.log("\n   d) Estimated cost per 1,000 session lifecycles (us-east-1 list prices)");
    const per1k = (value: number) => usd((value / N) * 1000);
    table(
      ["step", "DynamoDB", "Step Functions", "Lambda req.", "Lambda dur.", "Scheduler", "WebSocket", "SQS", "total"],
      rows.map(({ label, usage }) => {
        const c = usage.cost();
        return [label, per1k(c.dynamo), per1k(c.stepFunctions), per1k(c.lambdaRequests), per1k(c.lambdaDuration), per1k(c.scheduler), per1k(c.websocket), per1k(c.sqs), per1k(c.total)];
      }),
    );

    // Issue 15: each figure beside the one measured at dd49683 (the issue's), and the target.
    console.log("\n   e) Per lifecycle, beside dd49683 (issue 15)");
    const requests = [...total.dynamo.values()].reduce((a, b) => a + b, 0) / N;
    const cost = (total.cost().total / N) * 1000;
    const sfn = (total.cost().stepFunctions / N) * 1000;
    table(
      ["figure", "dd49683", BEFORE_LAST_PASS.commit, "now", "target"],
      [
        ["DynamoDB requests", `${BEFORE_ISSUE_15.dynamoRequests} (${BEFORE_ISSUE_15.dynamoMix})`, BEFORE_LAST_PASS.dynamoRequests, `${num(requests)} (${perSession(total.dynamo, N)})`, "<= 26"],
        ["Step Functions state transitions", BEFORE_ISSUE_15.transitions, BEFORE_LAST_PASS.transitions, num(total.transitions / N), "-"],
        ["cost per 1,000 lifecycles", `$${BEFORE_ISSUE_15.usdPer1000.toFixed(2)} (${BEFORE_ISSUE_15.stepFunctionsShare}% Step Functions)`, usd(BEFORE_LAST_PASS.usdPer1000), `${usd(cost)} (${((sfn / cost) * 100).toFixed(0)}% Step Functions)`, "<= $0.35"],
      ],
    );
    if (total.chainedStarts > 0) note(`Flows started by steps or schedules (chained StartExecution): ${num(total.chainedStarts / N)} per lifecycle, included in executions.`);
    note("DynamoDB counts per flow include the API's one read (1 GetItem: the session and its lease fence together) before StartExecution.");
    note("ensure-runtime's BatchGetItem is the org's limits and model together; Finish's Query is the connection listing when a client");
    note("connected since Begin listed them (none here: the one client connects before the lifecycle) or there was no progress push");
    note("(pause, stop); the queued-prompt Query is skipped for a session that never had a prompt (none here: each prompt adds one Query).");
    note("Relay nudges go to SQS (one SendMessage per committed flow; priced with the relays' ReceiveMessage and DeleteMessage,");
    note("3 requests at $0.40 per million); they were a DynamoDB PutItem each until issue 15's SQS change.");
    note("How counted: transitions = states entered (Task, Pass, Choice) + retries, read from each execution's event log");
    note("(aws-local-stepfunctions eventLogs); Standard workflows bill each as one transition ($0.025 per 1,000, the 4,000/month");
    note("free tier ignored). Lambda invocations = Task handler calls (one Lambda per Task attempt); StartExecution is not billed.");
    note("Lambda duration: 512 MB arm64 at $0.0000133334 per GB-s, billed per 1 ms on the measured local step durations:");
    note("an optimistic proxy (warm, in-process, dynalite on loopback; no cold starts, no real DynamoDB or provider latency).");
    note("EventBridge Scheduler bills scheduled invocations ($1.00 per million, 14M/month free ignored); Create/Update/Delete");
    note("schedule API requests are not billed (assumption from the pricing page). Schedules armed here are cancelled by stop,");
    note("so none fires in a lifecycle; each one that does fire adds $1.00/M plus its Lambda and the flow it starts.");
    note("Scheduler API = requests the AWS adapter would send (CreateSchedule; + UpdateSchedule on re-arm; DeleteSchedule).");
    note("Pushes: one connected client per session; API Gateway WebSocket messages at $1.00 per million (32 KB units);");
    note("connection minutes are not included. The API requests that start each flow (API Gateway + the API Lambda) and the");
    note("$connect write are not included either; the create row counts only the API's BatchWriteItem (session + open-session marker).");
    for (const line of dynamoCostNotes()) note(line);
    note(`Flow retries run with the harness's retryIntervalScale 0.01. Local dynalite and in-process flows: latency is not AWS latency.`);
  } finally {
    await h.close();
  }
}
