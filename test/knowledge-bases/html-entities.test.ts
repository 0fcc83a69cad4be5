import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, indexText, query } from "./kb-fixtures";

describe("knowledge bases: HTML character references", () => {
  it("indexes named references as their characters (caf&eacute;, &Scaron;koda, &ccaron;), so the words are found", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const page =
      "<html><body><p>The caf&eacute; by the &Scaron;koda works serves &ccaron;aj and cr&egrave;me br&ucirc;l&eacute;e &mdash; &euro;4.</p></body></html>";
    await indexText(key, kb, "menu.html", page, undefined, "text/html");
    const found = await query(key, kb, { queries: ["café"], config: { retrieval_config: { search_mode: "keyword" } } });
    expect(found.items.length).toBe(1);
    expect(String(found.items[0].text)).toContain("The café by the Škoda works serves čaj and crème brûlée — €4.");
    for (const word of ["škoda", "čaj"]) {
      const hit = await query(key, kb, { queries: [word], config: { retrieval_config: { search_mode: "keyword" } } });
      expect(hit.items.length, word).toBe(1);
    }
  });
});
