/**
 * The DynamoDB SDK (`@aws-sdk/client-dynamodb`, `@aws-sdk/lib-dynamodb`): every store adapter
 * takes its values (commands, the clients, the errors it handles) from here, and its types from
 * the packages (`import type`).
 *
 * Why not `import`: the SDK is CommonJS, and a Lambda bundle (ESM, `@aws-sdk/*` external) that
 * imports it makes Node load it through the ES module loader, which lexes each CommonJS module
 * for its export names and detects its format first: on the bench machine that adds ~25 ms to
 * every function's cold import (~45 ms by `require`, ~70 ms by `import`). So this module
 * `require`s it: in a bundle, esbuild keeps the call for an external package (the bundle's
 * banner defines `require`, infra/handler-function.ts) and inlines the package otherwise (the
 * relay image); under vitest `require` exists; under tsx (the local runtime, an ES module
 * without `require`) one is made for this file.
 */
import { createRequire } from "node:module";
import type * as DynamoDB from "@aws-sdk/client-dynamodb";
import type * as DocumentClient from "@aws-sdk/lib-dynamodb";

/* eslint-disable @typescript-eslint/no-require-imports -- the literal calls are what esbuild keeps (external) or inlines (bundled) */
const dynamodb = (typeof require === "function" ? require("@aws-sdk/client-dynamodb") : createRequire(import.meta.url)("@aws-sdk/client-dynamodb")) as typeof DynamoDB;
const documentClient = (typeof require === "function" ? require("@aws-sdk/lib-dynamodb") : createRequire(import.meta.url)("@aws-sdk/lib-dynamodb")) as typeof DocumentClient;
/* eslint-enable @typescript-eslint/no-require-imports */

export const { DynamoDBClient, CreateTableCommand, DescribeTableCommand, ResourceNotFoundException, ConditionalCheckFailedException } = dynamodb;
export const { DynamoDBDocumentClient, BatchGetCommand, BatchWriteCommand, DeleteCommand, GetCommand, PutCommand, QueryCommand, ScanCommand, UpdateCommand } = documentClient;
/** The document client's instance type, under the class's name as the package exports it. */
export type DynamoDBDocumentClient = DocumentClient.DynamoDBDocumentClient;
