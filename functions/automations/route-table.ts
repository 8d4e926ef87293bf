/** The automations' HTTP routes (API.md "Automations"): apart from their handlers, so the API document lists them without loading them. */
export const AUTOMATION_ROUTES = [
  { id: "CreateAutomation", method: "POST", path: "/v1/automations" },
  { id: "ListAutomations", method: "GET", path: "/v1/automations" },
  { id: "GetAutomation", method: "GET", path: "/v1/automations/{id}" },
  { id: "PatchAutomation", method: "PATCH", path: "/v1/automations/{id}" },
  { id: "DeleteAutomation", method: "DELETE", path: "/v1/automations/{id}" },
  { id: "RunAutomation", method: "POST", path: "/v1/automations/{id}/runs" },
  { id: "ListAutomationRuns", method: "GET", path: "/v1/automations/{id}/runs" },
  { id: "AutomationWebhook", method: "POST", path: "/v1/automations/{id}/webhook" },
] as const;
export type AutomationRouteId = (typeof AUTOMATION_ROUTES)[number]["id"];
