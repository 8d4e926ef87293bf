export { LocalSandboxProvider, type LocalSandboxProviderOptions } from "./local-sandbox-provider";
