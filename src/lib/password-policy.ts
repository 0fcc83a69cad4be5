import { z } from "@hono/zod-openapi";
import { AppError } from "./errors";

/**
 * The rules for a password a person chooses (sign-up, an admin adding a user): long enough,
 * not blank, not one of the passwords attackers try first. Length does most of the work; the
 * list catches the long ones that are still guessed early ("1q2w3e4r5t6y", "password1234").
 */
export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 256;
const MIN_DISTINCT_CHARACTERS = 4;

/** The synchronous rules, as a zod field: a Group B body answers 422 naming `password`. */
export const zNewPassword = () =>
  z
    .string()
    .min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`)
    .max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`)
    .refine((password) => password.trim().length > 0, "must not be only spaces")
    .refine(
      (password) => new Set(password.toLowerCase()).size >= MIN_DISTINCT_CHARACTERS,
      `must use at least ${MIN_DISTINCT_CHARACTERS} different characters`,
    )
    .openapi({ description: `At least ${MIN_PASSWORD_LENGTH} characters, not blank, not a commonly used password.` });

let common: Promise<Set<string>> | undefined;

/**
 * The common-password list (zxcvbn-ts's, ~49,000 entries from leaked-password corpora), without
 * the entries too short to be a stem worth matching. Loaded on first use, not at start-up:
 * unpacking it costs tens of milliseconds that requests which never set a password should not pay.
 */
function commonPasswords(): Promise<Set<string>> {
  common ??= import("@zxcvbn-ts/language-common").then(
    ({ dictionary }) => new Set(dictionary["passwords-common"].filter((entry) => entry.length >= 4)),
  );
  return common;
}

/** A common password as typed, or one with only digits and symbols added ("Password2024!"). */
export async function isCommonPassword(password: string): Promise<boolean> {
  const list = await commonPasswords();
  const lower = password.trim().toLowerCase();
  const stem = lower.replace(/[^a-z]+$/, "");
  return list.has(lower) || (stem.length >= 4 && list.has(stem));
}

/** Throws the Group B 422 for `body.password` when the password is a common one. */
export async function assertPasswordNotCommon(password: string): Promise<void> {
  if (await isCommonPassword(password)) {
    throw new AppError("validation", "request validation failed", {
      issues: [
        {
          loc: ["body", "password"],
          msg: "is too common: it appears in lists of leaked passwords; choose another",
          type: "password_too_common",
        },
      ],
    });
  }
}
