import { z } from "@hono/zod-openapi";
import { zId, zString } from "../../lib/schema";
import { zNewPassword } from "../../lib/password-policy";

export const SignupBody = z
  .object({
    email: z.string().max(254).email("must be an email address"),
    password: zNewPassword(),
    username: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{2,64}$/, "2-64 letters, digits, '_', '.' or '-'")
      .optional(),
    name: zString(0, 200).optional(),
    organization: zString(1, 120)
      .optional()
      .openapi({ description: "A new organization's name; you become its owner." }),
  })
  .openapi("SignupBody");

export const LoginBody = z
  .object({
    username: zString(1, 254).openapi({ description: "Email or username." }),
    password: zString(1, 256),
    grant_type: z.literal("password").optional(),
    scope: z.string().max(500).optional(),
  })
  .openapi("LoginBody");

export const ApiKeyCreateBody = z.object({ name: zString(1, 100) }).openapi("ApiKeyCreateBody");

export const ApiKeyParams = z.object({ id: zId() });
