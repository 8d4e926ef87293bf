// One linter for the whole repository: typescript-eslint's recommended rules on top of ESLint's.
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "cdk.out/", "coverage/", ".data/", ".rehearsal/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-non-null-assertion": "error",
      "no-console": ["error", { allow: ["error"] }],
    },
  },
  {
    files: ["clients/console/**"],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ["infra/local/**", "scripts/**", "test/bench/**", "sandbox/**"],
    rules: { "no-console": "off" },
  },
);
