/** asl-validator 4 ships no type declarations: the one function the rehearsal calls. */
declare module "asl-validator" {
  interface AslValidationResult {
    isValid: boolean;
    errors: { message: string }[];
    errorsText: (separator?: string) => string;
  }
  export default function aslValidator(definition: unknown, options?: { checkPaths?: boolean; checkArn?: boolean }): AslValidationResult;
}
