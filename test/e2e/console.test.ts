/**
 * The web console in a real headless chromium (Debian's, driven by playwright-core) against the
 * local runtime with real OpenCode and the development model: sign in with the token, create a
 * session with a first prompt, see its `echo:` answer streamed (text-delta frames reach the page),
 * open the sidecar terminal, queue a prompt behind a busy turn from the prompt box, pause, and see
 * the session resume on the next prompt (and its answer). The `it`s run in order on one runtime and one page. A screenshot of the
 * session view goes to test-results/console-session.png.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LocalRuntime } from "../../infra/local/runtime";
import { startRuntimeForTest, storedSession, type ApiClient } from "../support/local-runtime";
import { runtimeDiagnostics } from "../support/runtime-diagnostics";

const CHROMIUM = "/usr/bin/chromium";
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
    throw new Error(`the console's browser test needs Debian's chromium at ${CHROMIUM}: run \`node scripts/ensure-deps.mjs --browser\` (what \`npm test\` runs first) or \`sudo apt-get install chromium\``);
  }
  ({ runtime, api } = await startRuntimeForTest({ retryIntervalScale: 0.05, env: { RELAY_SCAN_INTERVAL_SECONDS: "0.2" } }));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // launch() gives the browser a fresh temporary profile of its own (no --user-data-dir).
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
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
    "sends prompts from the prompt box, shows the queue position of one behind a busy turn; the timeline has per-step timings",
    async () => {
      // A busy turn (the development model's `sleep <N>s`), then a prompt that queues behind it.
      await page.locator("textarea[name=prompt]").fill("sleep 4s before the next one");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".message.role-user .text", { hasText: "sleep 4s before the next one" }).waitFor({ timeout: 30_000 });
      await page.locator("textarea[name=prompt]").fill("second prompt");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".queue", { hasText: "Prompt queued at position 1" }).waitFor({ timeout: 30_000 });
      await page.locator(".message.role-user .text", { hasText: "second prompt" }).waitFor({ timeout: 30_000 });
      await page.locator(".message.role-assistant .text", { hasText: "echo: sleep 4s before the next one" }).waitFor({ timeout: LONG });
      expect(frames.some((f) => f.type === "prompt.queued" && f.position === 1)).toBe(true);
      // The queued prompt's turn ends (a finalize after the busy turn's answer). Its text is not
      // asserted: OpenCode 1.18.33 reports idle before its loop ends, and a prompt delivered at that
      // boundary is sometimes answered with nothing (a server issue tracked apart, see commit
      // 102ffe1); the console shows whatever the turn streams.
      const busyAnswer = frames.findIndex((f) => f.type === "message.finalize" && String(f.text).includes("echo: sleep 4s"));
      await expect.poll(() => frames.slice(busyAnswer + 1).some((f) => f.type === "message.finalize"), { timeout: LONG }).toBe(true);
      await expect.poll(() => page.locator(".queue").textContent(), { timeout: 10_000 }).toBe("");

      await page.getByRole("button", { name: "Refresh" }).click();
      const runtimeEvent = page.locator(".timeline .event", { hasText: "ensure-runtime" }).first();
      await runtimeEvent.waitFor({ timeout: 30_000 });
      await expect.poll(() => runtimeEvent.locator(".timing.total").textContent(), { timeout: 10_000 }).toMatch(/total \d+ ms/);
      expect(await runtimeEvent.locator(".timing").count()).toBeGreaterThan(1);
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
