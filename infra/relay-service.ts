/**
 * The streaming relay (ARCHITECTURE.md §1, functions/relay/) on ECS Fargate: a VPC with public
 * subnets only (the relay's one job is outbound HTTPS to sandbox tunnels and AWS APIs, so a NAT
 * gateway would add cost and nothing else), tasks with public IPs behind a security group that
 * admits nothing in, container-level health checks (no load balancer: nobody connects to the
 * relay), and scaling on CPU and on the SSE streams each task holds (up to 10,000 per task).
 *
 * The image is built from `infra/relay/Dockerfile` by cdk-assets at deploy time; synth only
 * records the asset (no Docker needed). The repository root is the build context, trimmed by
 * `.dockerignore` to what the bundle needs.
 */
import path from "node:path";
import { Duration, RemovalPolicy, Size, Stack, Validations } from "aws-cdk-lib";
import { Metric, Stats } from "aws-cdk-lib/aws-cloudwatch";
import type { Table } from "aws-cdk-lib/aws-dynamodb";
import { FlowLogDestination, FlowLogTrafficType, Peer, Port, SecurityGroup, SubnetType, Vpc } from "aws-cdk-lib/aws-ec2";
import { Platform } from "aws-cdk-lib/aws-ecr-assets";
import {
  AwsLogDriverMode,
  Cluster,
  ContainerImage,
  ContainerInsights,
  CpuArchitecture,
  FargatePlatformVersion,
  FargateService,
  FargateTaskDefinition,
  LogDrivers,
  OperatingSystemFamily,
  type ContainerDefinition,
} from "aws-cdk-lib/aws-ecs";
import { PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import type { CfnTable } from "aws-cdk-lib/aws-dynamodb";
import type { Construct } from "constructs";
import { REPO_ROOT } from "./handler-function";

/** The relay's `POWERTOOLS_SERVICE_NAME`, so the `service` dimension of every metric it publishes. */
export const RELAY_SERVICE_NAME = "sandbox-relay";
/** The port of the relay's health endpoint inside the task (never exposed: the security group admits nothing). */
export const RELAY_HEALTH_PORT = 8080;
/** Per-task gauge the relay publishes (count of SSE streams it holds); scaling tracks its average. */
export const HELD_STREAMS_METRIC = "HeldStreams";
/**
 * Most sessions one task claims (`RELAY_MAX_SESSIONS`); the rest wait for another task. Issue 15:
 * a held stream costs no DynamoDB request at rest (one heartbeat per task), so a task holds
 * 10,000 (bench section 5: heap ~18 KiB and one socket per stream, RSS ~0.62 GiB at the cap with
 * tsx in each of the RELAY_WORKERS threads).
 */
export const RELAY_MAX_SESSIONS = 10_000;
/**
 * Relays per task, one per worker thread (functions/relay/workers.ts), each holding
 * RELAY_MAX_SESSIONS / RELAY_WORKERS: with a heap and an event loop per 2,500 streams the fan-out
 * p99 at 10,000 was under 20 ms in 5 of 6 quiet and heartbeat-round runs (bench section 5c), where
 * one heap and one loop's was 30-36 ms. During a takeover it is not yet (README).
 */
export const RELAY_WORKERS = 4;
/** The task size for RELAY_MAX_SESSIONS streams: 1 vCPU, 2 GB (Fargate's nofile default, 65,535, covers the sockets). */
export const RELAY_TASK_CPU = 1024;
export const RELAY_TASK_MEMORY_MIB = 2048;
/**
 * Average streams per task that scaling tracks: below the cap, so a new task is starting while
 * the others still have room. At or above the cap the metric could never exceed the target.
 */
export const HELD_STREAMS_TARGET = 7_500;
export const RELAY_MIN_TASKS = 2;
export const RELAY_MAX_TASKS = 10;
/** Fargate's maximum: time between SIGTERM and SIGKILL for the relay to release its leases. */
const STOP_TIMEOUT = Duration.seconds(120);

export interface RelayServiceProps {
  table: Table;
  /** Container environment: the shared configuration (functions/config/config.ts). */
  environment: Record<string, string>;
  /** CloudWatch namespace of the relay's metrics (its POWERTOOLS_METRICS_NAMESPACE). */
  metricsNamespace: string;
}

export interface RelayService {
  service: FargateService;
  cluster: Cluster;
  taskDefinition: FargateTaskDefinition;
  container: ContainerDefinition;
  taskRole: Role;
  heldStreams: Metric;
}

export function createRelayService(scope: Construct, props: RelayServiceProps): RelayService {
  const stack = Stack.of(scope);

  const flowLogs = new LogGroup(scope, "RelayVpcFlowLogs", { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
  const vpc = new Vpc(scope, "RelayVpc", {
    maxAzs: 2,
    natGateways: 0,
    subnetConfiguration: [{ name: "public", subnetType: SubnetType.PUBLIC, cidrMask: 24 }],
    // Nothing is placed in the default security group; restricting it would take a custom-resource
    // Lambda with a managed policy for no gain.
    restrictDefaultSecurityGroup: false,
    flowLogs: { all: { destination: FlowLogDestination.toCloudWatchLogs(flowLogs), trafficType: FlowLogTrafficType.ALL } },
  });

  const securityGroup = new SecurityGroup(scope, "RelaySecurityGroup", {
    vpc,
    description: "Streaming relay tasks: no inbound; outbound HTTPS only (sandbox tunnels, AWS APIs, ECR)",
    allowAllOutbound: false,
  });
  // Sandbox tunnels (Modal, E2B) and every AWS endpoint are HTTPS. DNS and time sync go to the
  // VPC's link-local resolvers, which security groups do not filter.
  securityGroup.addEgressRule(Peer.anyIpv4(), Port.tcp(443), "HTTPS to sandbox tunnels and AWS APIs");

  const cluster = new Cluster(scope, "RelayCluster", { vpc, containerInsightsV2: ContainerInsights.ENABLED });

  const taskRole = new Role(scope, "RelayTaskRole", {
    assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com", { conditions: { StringEquals: { "aws:SourceAccount": stack.account } } }),
    description: "Task role of the streaming relay (ECS Fargate)",
  });
  const taskDefinition = new FargateTaskDefinition(scope, "RelayTask", {
    cpu: RELAY_TASK_CPU,
    memoryLimitMiB: RELAY_TASK_MEMORY_MIB,
    runtimePlatform: { cpuArchitecture: CpuArchitecture.ARM64, operatingSystemFamily: OperatingSystemFamily.LINUX },
    taskRole,
  });

  const logGroup = new LogGroup(scope, "RelayLogs", { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
  const container = taskDefinition.addContainer("relay", {
    image: ContainerImage.fromAsset(REPO_ROOT, { file: path.join("infra", "relay", "Dockerfile"), platform: Platform.LINUX_ARM64 }),
    essential: true,
    readonlyRootFilesystem: true,
    environment: {
      ...props.environment,
      POWERTOOLS_SERVICE_NAME: RELAY_SERVICE_NAME,
      RELAY_HEALTH_PORT: String(RELAY_HEALTH_PORT),
      RELAY_MAX_SESSIONS: String(RELAY_MAX_SESSIONS),
      RELAY_WORKERS: String(RELAY_WORKERS),
    },
    // Node is all the image has (no curl): any 2xx from the health endpoint is healthy.
    healthCheck: {
      command: ["CMD", "node", "-e", `fetch('http://127.0.0.1:${RELAY_HEALTH_PORT}').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))`],
      interval: Duration.seconds(30),
      timeout: Duration.seconds(5),
      retries: 3,
      startPeriod: Duration.seconds(30),
    },
    // SIGTERM starts the drain (stop scanning, retire the heartbeat so other tasks take the sessions over at once).
    stopTimeout: STOP_TIMEOUT,
    // Non-blocking: a slow CloudWatch Logs must never stall the event loop that relays the streams.
    logging: LogDrivers.awsLogs({ logGroup, streamPrefix: "relay", mode: AwsLogDriverMode.NON_BLOCKING, maxBufferSize: Size.mebibytes(25) }),
  });

  const service = new FargateService(scope, "RelayService", {
    cluster,
    taskDefinition,
    assignPublicIp: true,
    vpcSubnets: { subnetType: SubnetType.PUBLIC },
    securityGroups: [securityGroup],
    platformVersion: FargatePlatformVersion.LATEST,
    // New tasks start before old ones stop; a deployment whose tasks never turn healthy rolls back.
    minHealthyPercent: 100,
    maxHealthyPercent: 200,
    circuitBreaker: { enable: true, rollback: true },
    // No desiredCount: with one in the template every deployment would reset the task count to it,
    // dropping the streams of every task scaling had added. A new service starts with one task and
    // registering the scalable target (minimum RELAY_MIN_TASKS) raises it at once.
  });

  props.table.grantReadWriteData(taskRole);
  // HeldStreams via PutMetricData (EMF on stdout needs no grant); only into the project's namespace.
  taskRole.addToPrincipalPolicy(
    new PolicyStatement({
      actions: ["cloudwatch:PutMetricData"],
      resources: ["*"],
      conditions: { StringEquals: { "cloudwatch:namespace": props.metricsNamespace } },
    }),
  );

  const heldStreams = new Metric({
    namespace: props.metricsNamespace,
    metricName: HELD_STREAMS_METRIC,
    dimensionsMap: { service: RELAY_SERVICE_NAME },
    // Each task publishes its own count: the average over them is the count per task.
    statistic: Stats.AVERAGE,
    period: Duration.minutes(1),
  });
  const scaling = service.autoScaleTaskCount({ minCapacity: RELAY_MIN_TASKS, maxCapacity: RELAY_MAX_TASKS });
  // Scale in slowly: a stopped task drains, and each of its sessions reconnects and catches up on
  // another task.
  const cooldowns = { scaleOutCooldown: Duration.minutes(1), scaleInCooldown: Duration.minutes(5) };
  scaling.scaleOnCpuUtilization("RelayCpuScaling", { targetUtilizationPercent: 60, ...cooldowns });
  scaling.scaleToTrackCustomMetric("RelayHeldStreamsScaling", { metric: heldStreams, targetValue: HELD_STREAMS_TARGET, ...cooldowns });

  const tableLogicalId = stack.getLogicalId(props.table.node.defaultChild as CfnTable);
  Validations.of(taskRole).acknowledge({
    id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${tableLogicalId}.Arn>/index/*]`,
    reason: "The table's own GSI ARNs (<table>/index/*), needed for the running-session scan and a takeover's read of a dead relay's sessions; no other table is reachable.",
  });
  Validations.of(taskRole).acknowledge({
    id: "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
    reason: "cloudwatch:PutMetricData supports no resource-level permissions; the statement is limited to the project's metric namespace by the cloudwatch:namespace condition.",
  });
  if (taskDefinition.executionRole) {
    Validations.of(taskDefinition.executionRole).acknowledge({
      id: "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
      reason: "ecr:GetAuthorizationToken (pulling the relay image) supports no resource-level permissions.",
    });
  }
  Validations.of(taskDefinition).acknowledge({
    id: "AwsSolutions::AwsSolutions-ECS2",
    reason: "The container environment holds configuration only (table name, ARNs, endpoints, timings); no secret is passed to the relay.",
  });

  return { service, cluster, taskDefinition, container, taskRole, heldStreams };
}
