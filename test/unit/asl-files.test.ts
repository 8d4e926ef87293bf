/**
 * The shape every lifecycle flow must keep (statemachines/*.asl.json): each Task bound to a
 * step, no dead states, every path released by `Finish`, every failing Task caught, and only
 * error names that steps actually throw (a typo in `ErrorEquals` would silently never match).
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { StateMachine } from "aws-local-stepfunctions";
import { STEP_ERRORS } from "../../functions/flows/step-errors";
import { FLOW_NAMES, type FlowName } from "../../functions/ports/flow-runner";
import { STATE_MACHINES_DIR, loadFlowDefinition, type LoadedFlow } from "../../infra/local/local-flow-runner";

interface Retrier {
  ErrorEquals: string[];
}
interface Catcher {
  ErrorEquals: string[];
  Next: string;
}
interface State {
  Type: string;
  Resource?: string;
  Next?: string;
  End?: boolean;
  Default?: string;
  Choices?: { Next: string }[];
  Retry?: Retrier[];
  Catch?: Catcher[];
}
interface Definition {
  StartAt: string;
  States: Record<string, State>;
}

const FINISH = "Finish";
const KNOWN_ERRORS = new Set<string>(Object.values(STEP_ERRORS));

const flows: { file: string; flow: FlowName; loaded: LoadedFlow; definition: Definition }[] = readdirSync(STATE_MACHINES_DIR)
  .filter((f) => f.endsWith(".asl.json"))
  .sort()
  .map((file) => {
    const name = file.replace(/\.asl\.json$/, "");
    const flow = FLOW_NAMES.find((f) => f === name);
    if (!flow) throw new Error(`${file} is named after no flow`);
    const loaded = loadFlowDefinition(flow);
    if (!loaded) throw new Error(`${file} did not load`);
    return { file, flow, loaded, definition: loaded.definition as unknown as Definition };
  });

/** Every state a state can hand control to: Next, Choices[].Next, Default, Catch[].Next. */
function successors(state: State): string[] {
  return [
    ...(state.Next ? [state.Next] : []),
    ...(state.Choices ?? []).map((c) => c.Next),
    ...(state.Default ? [state.Default] : []),
    ...(state.Catch ?? []).map((c) => c.Next),
  ];
}

function reachableFrom(definition: Definition, start: string): Set<string> {
  const seen = new Set<string>();
  const todo = [start];
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    if (seen.has(name)) continue;
    seen.add(name);
    const state = definition.States[name];
    if (state) todo.push(...successors(state));
  }
  return seen;
}

function isTerminal(state: State): boolean {
  return state.End === true || state.Type === "Succeed" || state.Type === "Fail";
}

function allErrorNames(definition: Definition): { state: string; where: "Retry" | "Catch"; name: string }[] {
  return Object.entries(definition.States).flatMap(([state, s]) => [
    ...(s.Retry ?? []).flatMap((r) => r.ErrorEquals.map((name) => ({ state, where: "Retry" as const, name }))),
    ...(s.Catch ?? []).flatMap((c) => c.ErrorEquals.map((name) => ({ state, where: "Catch" as const, name }))),
  ]);
}

function retriedErrors(state: State | undefined): string[] {
  return (state?.Retry ?? []).flatMap((r) => r.ErrorEquals);
}

describe("the ASL files", () => {
  it("exist for the flows that have a state machine", () => {
    expect(flows.map((f) => f.flow)).toEqual(expect.arrayContaining(["ensure-runtime", "pause", "snapshot", "stop", "migrate"]));
  });
});

describe.each(flows)("$file", ({ file, loaded, definition }) => {
  const states = Object.entries(definition.States);
  const tasks = states.filter(([, s]) => s.Type === "Task");

  it("binds every Task to a flow step, and validates as a state machine", () => {
    expect(tasks.length).toBeGreaterThan(0);
    expect(Object.keys(loaded.taskSteps).sort()).toEqual(tasks.map(([name]) => name).sort());
    expect(loaded.taskSteps.Begin).toBe("BeginStep");
    expect(loaded.taskSteps[FINISH]).toBe("FinishStep");
    expect(() => new StateMachine(loaded.definition as never)).not.toThrow();
  });

  it("reaches every state from StartAt, and every successor exists", () => {
    for (const [name, state] of states) {
      for (const next of successors(state)) expect(Object.keys(definition.States), `${name} -> ${next}`).toContain(next);
    }
    expect([...reachableFrom(definition, definition.StartAt)].sort()).toEqual(states.map(([name]) => name).sort());
  });

  it("ends only in Finish or in a Commit (which runs Finish in process), and every state reaches Finish: every path releases the lease", () => {
    // Issue 15: the committed path has no Finish state; the Commit step writes (releasing the
    // lease in the same write) and finishes in its own invocation. Every failure it meets still
    // goes to Finish, so every state can reach it.
    // ensure-runtime has no Commit state: its Provision commits and finishes in process.
    const commits = tasks.filter(([name, s]) => loaded.taskSteps[name] === "CommitStep" || (loaded.taskSteps[name] === "ProvisionStep" && s.End === true)).map(([name]) => name);
    if (file === "ensure-runtime.asl.json") expect(commits).toEqual(["Provision"]);
    expect(commits.length).toBeGreaterThan(0);
    const terminals = states.filter(([, s]) => isTerminal(s)).map(([name]) => name);
    expect(terminals.sort()).toEqual([FINISH, ...commits].sort());
    expect(definition.States[FINISH]).toMatchObject({ Type: "Task", End: true });
    expect(successors(definition.States[FINISH] ?? { Type: "?" })).toEqual([]);
    for (const name of commits) {
      expect(definition.States[name]).toMatchObject({ Type: "Task", End: true });
      expect(definition.States[name]?.Catch?.[0], `${name}: an incomplete in-process finish goes to Finish`).toMatchObject({ Next: FINISH, ResultPath: "$.carried" });
      expect(definition.States[name]?.Catch?.[0]?.ErrorEquals).toContain(STEP_ERRORS.finishIncomplete);
      // A Provision whose in-process commit did not land has discarded its sandbox already.
      if (loaded.taskSteps[name] === "ProvisionStep") expect(definition.States[name]?.Catch?.[0]?.ErrorEquals).toEqual([STEP_ERRORS.finishIncomplete, STEP_ERRORS.discarded]);
    }
    for (const [name, state] of states) {
      if (name === FINISH) continue;
      if (!commits.includes(name)) expect(isTerminal(state), name).toBe(false);
      expect(successors(state).length, `${name} has no way on`).toBeGreaterThan(0);
      expect(reachableFrom(definition, name).has(FINISH), `${name} cannot reach Finish`).toBe(true);
    }
  });

  it("has no Pass or Choice state between the execution's start and Begin, and Begin's nothing-to-do goes straight to Finish", () => {
    // Issue 15: every state entered is a billed transition; the runner puts the execution name in
    // the input, and Begin carries its result to Finish through a Catch instead of a Choice.
    // idle-snapshot alone starts with a Wait on the input's notBefore: an early idle check waits there, not in a Lambda.
    // The user pause needs `$$.Execution.StartTime` (issue 25 §1: clients that connect after it
    // wake the session): its Begin's Parameters add it beside the input, no Pass state.
    if (file === "idle-snapshot.asl.json") {
      expect(definition.StartAt).toBe("WaitUntilDue");
      expect(definition.States.WaitUntilDue).toMatchObject({ Type: "Wait", TimestampPath: "$.notBefore", Next: "Begin" });
    } else if (file === "pause.asl.json") {
      // The user pause's Begin gets `$$.Execution.StartTime` beside the whole input through its Parameters (no Pass state).
      expect(definition.StartAt).toBe("Begin");
      expect(definition.States.Begin).toMatchObject({ Parameters: { "document.$": "$", "executionStartedAt.$": "$$.Execution.StartTime" }, ResultPath: "$.begin" });
    } else {
      expect(definition.StartAt).toBe("Begin");
    }
    expect(definition.States.Begin?.Catch?.[0]).toMatchObject({ ErrorEquals: [STEP_ERRORS.nothingToDo], Next: FINISH });
    expect(states.filter(([, s]) => s.Type === "Pass")).toEqual([]);
  });

  it("catches every failure of every Task except Finish, with States.ALL as the last catcher", () => {
    for (const [name, state] of tasks) {
      if (name === FINISH) {
        expect(state.Catch, "Finish has nowhere to go on failure").toBeUndefined();
        expect(retriedErrors(state)).toContain("States.ALL");
        continue;
      }
      const catchers = state.Catch ?? [];
      expect(catchers.length, `${file}: ${name} has no Catch`).toBeGreaterThan(0);
      expect(catchers.at(-1)?.ErrorEquals, `${file}: ${name}`).toEqual(["States.ALL"]);
    }
  });

  it("uses States.ALL only alone and last, in Retry and Catch", () => {
    for (const [name, state] of states) {
      for (const list of [state.Retry ?? [], state.Catch ?? []]) {
        list.forEach((entry, i) => {
          if (!entry.ErrorEquals.includes("States.ALL")) return;
          expect(entry.ErrorEquals, name).toEqual(["States.ALL"]);
          expect(i, `${name}: States.ALL must be the last entry`).toBe(list.length - 1);
        });
      }
    }
  });

  it("retries LeaseBusy in Begin and ProviderTransient in every Provision and Snapshot task", () => {
    expect(retriedErrors(definition.States.Begin)).toContain(STEP_ERRORS.leaseBusy);
    for (const [name] of tasks) {
      const step = loaded.taskSteps[name];
      if (step === "ProvisionStep" || step === "SnapshotStep") {
        expect(retriedErrors(definition.States[name]), `${file}: ${name}`).toContain(STEP_ERRORS.providerTransient);
      }
    }
  });

  it("names only errors steps throw: States.ALL, Lambda.*, or a STEP_ERRORS value", () => {
    const names = allErrorNames(definition);
    expect(names.length).toBeGreaterThan(0);
    for (const { state, where, name } of names) {
      const known = name === "States.ALL" || /^Lambda\.[A-Za-z]+$/.test(name) || KNOWN_ERRORS.has(name);
      expect(known, `${file}: ${state}.${where} names unknown error ${name}`).toBe(true);
    }
  });
});

describe("loadFlowDefinition", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "asl-files-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const pause = readFileSync(path.join(STATE_MACHINES_DIR, "pause.asl.json"), "utf8");

  it("returns null for a flow with no file", () => {
    expect(loadFlowDefinition("stop", dir)).toBeNull();
  });

  it("throws when a substitution names no flow step", () => {
    expect(pause).toContain("${SnapshotStepFunctionArn}");
    writeFileSync(path.join(dir, "pause.asl.json"), pause.replace("${SnapshotStepFunctionArn}", "${SnapshotStepFuncionArn}"));
    expect(() => loadFlowDefinition("pause", dir)).toThrow(/\$\{SnapshotStepFuncionArn\} names no flow step/);
  });

  it("throws when a Task's Resource is no step's ARN", () => {
    writeFileSync(
      path.join(dir, "snapshot.asl.json"),
      pause.replace("${SnapshotStepFunctionArn}", "arn:aws:lambda:us-east-1:000000000000:function:somewhere-else"),
    );
    expect(() => loadFlowDefinition("snapshot", dir)).toThrow(/Task Snapshot is not bound to a flow step/);
  });

  it("loads an unchanged copy from another directory", () => {
    writeFileSync(path.join(dir, "migrate.asl.json"), pause);
    expect(loadFlowDefinition("migrate", dir)?.taskSteps).toMatchObject({ Begin: "BeginStep", Snapshot: "SnapshotStep", Finish: "FinishStep" });
  });
});
