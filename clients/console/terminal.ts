/**
 * The sidecar terminal (a separate bundle, loaded only when a user opens it): xterm.js over the
 * sidecar's `/terminal` WebSocket. A browser cannot set an `Authorization` header on a WebSocket,
 * so the sidecar access token goes in the `Sec-WebSocket-Protocol` offer (`bearer.<token>`), never
 * in the URL (sandbox/sidecar/auth.ts `protocolCredential`).
 */
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";

export const TERMINAL_PROTOCOL = "sidecar.terminal"; // sandbox/sidecar/auth.ts TERMINAL_PROTOCOL

export interface MountedTerminal {
  close(): void;
}

export function mountTerminal(element: HTMLElement, terminalUrl: string, token: string, onClose: (reason: string) => void): MountedTerminal {
  const term = new Terminal({ convertEol: false, cursorBlink: true, fontSize: 13, theme: { background: "#0f1115" } });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(element);
  fit.fit();
  const ws = new WebSocket(terminalUrl, [TERMINAL_PROTOCOL, `bearer.${token}`]);
  ws.binaryType = "arraybuffer";
  const decoder = new TextDecoder();
  const sendResize = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  };
  ws.onopen = () => {
    sendResize();
    term.focus();
  };
  ws.onmessage = (event: MessageEvent) => {
    term.write(typeof event.data === "string" ? event.data : decoder.decode(new Uint8Array(event.data as ArrayBuffer)));
  };
  ws.onclose = (event: CloseEvent) => onClose(event.reason || `closed (${event.code})`);
  const input = term.onData((data) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(data);
  });
  const onResize = () => {
    fit.fit();
    sendResize();
  };
  window.addEventListener("resize", onResize);
  return {
    close() {
      window.removeEventListener("resize", onResize);
      input.dispose();
      ws.close();
      term.dispose();
    },
  };
}
