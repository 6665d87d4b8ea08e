import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "box/**"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "no-restricted-syntax": [
        "error",
        {
          selector: "CallExpression[callee.object.name='Effect'][callee.property.name=/^run(Promise|Sync|Fork)$/]",
          message: "Run effects only at the program's edge (src/bin.ts)."
        }
      ]
    }
  },
  {
    files: ["src/bin.ts", "test/**", "bench/**"],
    rules: { "no-restricted-syntax": "off" }
  }
)
