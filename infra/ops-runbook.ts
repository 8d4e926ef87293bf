/**
 * Runbook lines (issue 19: each alarm's description says what to check first) for the alarms the
 * stack's other constructs create with a plain description: added once, where the root stack
 * wires every alarm to the alarm topic, by what the alarm watches.
 */
import { CfnAlarm, type Alarm } from "aws-cdk-lib/aws-cloudwatch";

export function runbookLine(alarm: Alarm): string {
  const stat = alarm.metric.toMetricConfig().metricStat;
  const namespace = stat?.namespace ?? "";
  const name = stat?.metricName ?? "";
  if (namespace === "AWS/Lambda") return "Check first: the function's log group (ERROR lines; requestId and sessionId in each), then what changed (a deploy, a provider outage).";
  if (namespace === "AWS/States") return "Check first: the failed execution in the Step Functions console (named <flow>-<sessionId>-<fence>), its failing state's input and error, and GET /v1/sessions/{id}/events.";
  if (namespace === "AWS/SQS") return "Check first: the consuming function's log group for why it failed, then read the dead letters (they name the delivery) and redrive them once fixed.";
  if (name === "IdleSnapshotCircuitBreakerTrips") return "Check first: the idle-snapshot executions of the stopped session (their snapshot step's error) and the provider's snapshot API status.";
  if (name === "OrphanSessionsFound") return "Check first: the relay service (running tasks, HeldStreams) and the schedule-fired function's errors: the idle checks did not run.";
  return "Check first: the Health dashboard.";
}

/** Appends the runbook line to an alarm whose description does not say what to check first. */
export function addRunbookLine(alarm: Alarm): void {
  const cfn = alarm.node.defaultChild;
  if (!(cfn instanceof CfnAlarm)) return;
  const description = cfn.alarmDescription ?? "";
  if (/Check first/.test(description)) return;
  cfn.alarmDescription = `${description.replace(/\.?\s*$/, "")}. ${runbookLine(alarm)}`;
}
