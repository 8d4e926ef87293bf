/**
 * The web console in a real headless chromium (Debian's, driven by playwright-core) against the
 * local runtime with real OpenCode and the development model: sign in with the token, create a
 * session with a first prompt, see its `echo:` answer streamed (text-delta frames reach the page),
 * its user message before it, open the sidecar terminal, queue a prompt behind a busy turn from
 * the prompt box (shown apart as queued with its position, then in the transcript after the
 * earlier answer; both answered),
 * expand the busy turn's tool call, take a snapshot and see it in the timeline, pause, and see
 * the session resume on the next prompt (and its answer). The `it`s run in order on one runtime and one page. A screenshot of the
 * session view goes to test-results/console-session.png (console-session-queued.png: with the
 * prompt queued).
 */
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";
import { CHROMIUM_ARGS, chromiumPath } from "../support/chromium";

const CHROMIUM = chromiumPath();
const ARTIFACTS = resolve("test-results");
const LONG = 180_000;

let runtime: LocalRuntime;
let api: ApiClient;
let browser: Browser;
let page: Page;
let sessionId = "";
/** Every frame the page's WebSockets received, in order (diagnostics and the streaming check). */
const frames: { type: string; [key: string]: unknown }[] = [];
const pageLog: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`the console's browser test needs Debian's chromium at ${CHROMIUM} (CHROMIUM_PATH, else \`chromium\` on the PATH): run \`node scripts/ensure-deps.mjs --browser\` (what \`npm test\` runs first) or \`sudo apt-get install chromium\``);
  }
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2" } }));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // launch() gives the browser a fresh temporary profile of its own (no --user-data-dir).
    args: CHROMIUM_ARGS,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (m) => pageLog.push(`console.${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => pageLog.push(`pageerror: ${e.message}`));
  page.on("websocket", (ws) => {
    ws.on("framereceived", (f) => {
      try {
        frames.push(JSON.parse(typeof f.payload === "string" ? f.payload : f.payload.toString("utf8")) as { type: string });
      } catch {
        /* terminal output is not JSON */
      }
    });
  });
});

afterEach((ctx) => {
  if (ctx.task.result?.state !== "fail") return;
  console.error(runtimeDiagnostics(runtime));
  console.error(`--- page log\n${pageLog.join("\n")}\n--- frames\n${frames.map((f) => JSON.stringify(f).slice(0, 300)).join("\n")}`);
});

afterAll(async () => {
  await browser?.close();
  await runtime?.close();
});

/** The text of the session view's status badge. */
const statusBadge = (p: Page) => p.locator(".session-status .badge");

/** The transcript's messages in page order: role and text. */
async function transcriptOrder(p: Page): Promise<{ role: string; text: string }[]> {
  type El = { className: string; textContent: string | null; querySelectorAll(selector: string): ArrayLike<El> };
  return p.locator(".transcript .message").evaluateAll((els) =>
    (els as unknown as El[]).map((e) => ({
      role: e.className.split(" ").find((c) => c.startsWith("role-"))?.slice(5) ?? "",
      text: Array.from(e.querySelectorAll(".text")).map((t) => t.textContent ?? "").join("\n"),
    })),
  );
}

/** Where the message of that role whose text includes `text` is (-1: none). */
const indexOf = (order: { role: string; text: string }[], role: string, text: string) => order.findIndex((m) => m.role === role && m.text.includes(text));

async function screenshot(name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name), fullPage: true });
}

describe("web console in headless chromium", () => {
  it("is served at / and refuses a wrong token at sign-in", async () => {
    await page.goto(`${runtime.url}/`);
    await page.locator("input[name=token]").fill("not-a-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent(), { timeout: 30_000 }).toContain("not accepted");
    await page.locator("input[name=token]").fill(runtime.devApiToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "New session" }).waitFor({ timeout: 30_000 });
  });

  it(
    "creates a session with a first prompt and shows the streamed echo answer",
    async () => {
      await page.locator("input[name=title]").fill("console e2e");
      await page.locator("textarea[name=initialPrompt]").fill("hello from the console");
      await page.getByRole("button", { name: "Create session" }).click();
      await page.waitForURL(/#\/sessions\/ses_/, { timeout: 30_000 });
      sessionId = decodeURIComponent(/#\/sessions\/([^/]+)$/.exec(page.url())?.[1] ?? "");
      expect(sessionId).toMatch(/^ses_/);
      expect((await storedSession(runtime, sessionId)).clientType).toBe("web");

      await page.locator(".message.role-assistant .text", { hasText: "echo: hello from the console" }).waitFor({ timeout: LONG });
      // The first prompt (sent over HTTP with the session) shows as the user's message, before its answer.
      await page.locator(".message.role-user .text", { hasText: "hello from the console" }).waitFor({ timeout: 30_000 });
      const first = await transcriptOrder(page);
      expect(indexOf(first, "user", "hello from the console")).toBeLessThan(indexOf(first, "assistant", "echo: hello from the console"));
      await expect.poll(() => statusBadge(page).textContent(), { timeout: 30_000 }).toBe("running");
      // Streamed: the page itself received the turn's deltas over its WebSocket (connected with a ticket).
      expect(frames.some((f) => f.type === "message.part.text-delta")).toBe(true);
      expect(frames.some((f) => f.type === "message.finalize" && String(f.text).includes("echo: hello from the console"))).toBe(true);
      await expect.poll(() => page.locator(".presence").textContent(), { timeout: 10_000 }).toContain("1 client connected");
    },
    LONG + 60_000,
  );

  it(
    "opens the sidecar terminal with a sidecar access token",
    async () => {
      await page.getByRole("button", { name: "Open terminal" }).click();
      await page.locator(".terminal .xterm").waitFor({ timeout: 60_000 });
      // The sidecar starts in the boot's second phase: reopen until the shell answers.
      await expect
        .poll(
          async () => {
            if (await page.locator(".terminal-card", { hasText: "Terminal closed" }).count()) await page.getByRole("button", { name: /Reconnect|Open terminal/ }).click();
            await page.locator(".terminal .xterm").click();
            await page.keyboard.type("echo console-term-$((6*7))\n");
            return page.locator(".terminal .xterm-rows").textContent();
          },
          { timeout: 60_000, interval: 2000 },
        )
        .toContain("console-term-42");
    },
    120_000,
  );

  it(
    "sends prompts from the prompt box, shows the queue position of one behind a busy turn and both answers, the tool call expanded; a snapshot in the timeline with per-step timings",
    async () => {
      // A busy turn (the development model's `sleep <N>s`), then a prompt that queues behind it.
      await page.locator("textarea[name=prompt]").fill("sleep 4s before the next one");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".message.role-user .text", { hasText: "sleep 4s before the next one" }).waitFor({ timeout: 30_000 });
      await page.locator("textarea[name=prompt]").fill("second prompt");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".queue", { hasText: "Prompt queued at position 1" }).waitFor({ timeout: 30_000 });
      // Queued behind the busy turn: shown apart with its position, not in the transcript yet (one DOM snapshot).
      const queued = page.locator(".queued .queued-prompt", { hasText: "second prompt" });
      await queued.waitFor({ timeout: 30_000 });
      const whileBusy = await page.locator(".queued .queued-prompt, .transcript .message.role-user .text").evaluateAll((els) =>
        (els as unknown as { className: string; textContent: string | null }[]).map((e) => ({ queued: e.className.includes("queued-prompt"), text: e.textContent ?? "" })),
      );
      expect(whileBusy.filter((e) => e.queued).map((e) => e.text)).toContainEqual(expect.stringContaining("#1"));
      expect(whileBusy.filter((e) => !e.queued).map((e) => e.text)).not.toContain("second prompt");
      await screenshot("console-session-queued.png");
      await page.locator(".message.role-assistant .text", { hasText: "echo: sleep 4s before the next one" }).waitFor({ timeout: LONG });
      // Delivered when its turn starts: in the transcript after the earlier answer, off the queued list.
      await page.locator(".message.role-user .text", { hasText: "second prompt" }).waitFor({ timeout: LONG });
      await queued.waitFor({ state: "detached", timeout: 30_000 });
      expect(frames.some((f) => f.type === "prompt.queued" && f.position === 1)).toBe(true);
      // The queued prompt is answered too (an answer OpenCode finished before its text came is
      // reopened by the server with it, and the page shows the revision).
      await page.locator(".message.role-assistant .text", { hasText: "echo: second prompt" }).waitFor({ timeout: LONG });
      await expect.poll(() => page.locator(".queue").textContent(), { timeout: 10_000 }).toBe("");
      await expect.poll(() => page.locator(".message.role-user .text", { hasText: "second prompt" }).count(), { timeout: 10_000 }).toBe(1);
      const order = await transcriptOrder(page);
      const at = [
        indexOf(order, "user", "hello from the console"),
        indexOf(order, "assistant", "echo: hello from the console"),
        indexOf(order, "user", "sleep 4s before the next one"),
        indexOf(order, "assistant", "echo: sleep 4s before the next one"),
        indexOf(order, "user", "second prompt"),
        indexOf(order, "assistant", "echo: second prompt"),
      ];
      expect(at.every((i) => i >= 0), JSON.stringify(order)).toBe(true);
      expect([...at].sort((a, b) => a - b), JSON.stringify(order)).toEqual(at);

      // The busy turn's tool call (the development model's real bash call), collapsed; expanded it shows its input.
      const tool = page.locator("details.tool", { has: page.locator(".tool-name", { hasText: "bash" }) }).first();
      await tool.waitFor({ timeout: 30_000 });
      expect(await tool.evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(false);
      await tool.locator("summary").click();
      expect(await tool.evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(true);
      await expect.poll(() => tool.locator("pre").first().textContent(), { timeout: 10_000 }).toContain("sleep 4");

      await page.getByRole("button", { name: "Refresh" }).click();
      const runtimeEvent = page.locator(".timeline .event", { hasText: "ensure-runtime" }).first();
      await runtimeEvent.waitFor({ timeout: 30_000 });
      await expect.poll(() => runtimeEvent.locator(".timing.total").textContent(), { timeout: 10_000 }).toMatch(/total \d+ ms/);
      expect(await runtimeEvent.locator(".timing").count()).toBeGreaterThan(1);

      // Snapshot without stopping: the flow appears in the timeline, the session keeps running.
      await page.getByRole("button", { name: "Snapshot" }).click();
      const snapshotEvent = page.locator(".timeline .event", { has: page.locator("strong", { hasText: /^snapshot$/ }) }).first();
      await expect
        .poll(
          async () => {
            await page.getByRole("button", { name: "Refresh" }).click();
            return (await snapshotEvent.count()) > 0 ? snapshotEvent.locator(".badge.outcome").textContent() : null;
          },
          { timeout: LONG, interval: 1000 },
        )
        .toBe("committed");
      await expect.poll(() => statusBadge(page).textContent(), { timeout: 30_000 }).toBe("running");
      await screenshot("console-session.png");
    },
    LONG + 60_000,
  );

  it(
    "pauses the session, then the next prompt resumes it and is answered",
    async () => {
      await page.getByRole("button", { name: "Pause" }).click();
      await expect.poll(() => statusBadge(page).textContent(), { timeout: LONG }).toBe("paused");
      await expect.poll(async () => (await storedSession(runtime, sessionId)).pauseReason, { timeout: 30_000 }).toBe("user");

      await page.locator("textarea[name=prompt]").fill("after the pause");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".message.role-assistant .text", { hasText: "echo: after the pause" }).waitFor({ timeout: LONG });
      await expect.poll(() => statusBadge(page).textContent(), { timeout: 30_000 }).toBe("running");
      const flows = ((await api.request("GET", `/v1/sessions/${sessionId}/events?limit=100`)).body as { items: { flow: string }[] }).items.map((e) => e.flow);
      expect(flows.filter((f) => f === "ensure-runtime").length).toBeGreaterThanOrEqual(2);
      expect(flows).toContain("pause");
      await page.getByRole("button", { name: "Refresh" }).click();
      await page.locator(".timeline .event", { hasText: "pause" }).first().waitFor({ timeout: 30_000 });
      await screenshot("console-session-resumed.png");
    },
    2 * LONG + 60_000,
  );
});
