import { z } from "@hono/zod-openapi";
import { zBool, zId, zInt, zString } from "../../lib/schema";
import { zNewPassword } from "../../lib/password-policy";

const AssignableRole = z
  .enum(["admin", "member", "viewer"])
  .openapi({ description: "The owner role moves only through /admin/owner/change." });

export const AddUserBody = z
  .object({
    email: z.string().max(254).email("must be an email address"),
    password: zNewPassword(),
    username: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{2,64}$/, "2-64 letters, digits, '_', '.' or '-'")
      .optional(),
    name: zString(0, 200).optional(),
    role: AssignableRole.default("member"),
  })
  .openapi("Body_add_user");

export const DeleteUserBody = z.object({ user_id: zId() }).openapi("Body_delete_user");

export const ChangeUserBody = z
  .object({
    user_id: zId(),
    role: z.string().max(20).optional().openapi({ description: "admin, member or viewer" }),
    name: zString(0, 200).optional(),
    suspended: zBool().optional(),
  })
  .openapi("Body_change_user");

export const ChangeOwnerBody = z
  .object({ user_id: zId().openapi({ description: "The member who becomes owner; you become admin." }) })
  .openapi("Body_change_owner");

export const AuditQuery = z.object({
  limit: zInt(1, 500).optional().default(100),
  before: z
    .string()
    .max(40)
    .optional()
    .openapi({ description: "Only entries created before this ISO time (for paging)." }),
});
