import { applyD1Migrations, env } from "cloudflare:test";

// Applying is idempotent: migrations already recorded in d1_migrations are skipped.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
