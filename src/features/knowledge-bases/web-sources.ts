import { and, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { kbDocuments, knowledgeBases, type KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { indexOne, ingestDocument, type IngestTarget } from "./ingestion.service";
import { vectorIndexFor } from "./vector-backend";
import { crawlFinished, crawlStep, PAGES_PER_STEP, startCrawl } from "./web-crawl";
import { pagesToDocuments, RESCRAPE_PERIOD_MS, webFetch, type WebSourceRecord } from "./web-ingestion";
import { deleteFiles } from "../../db/files";

/**
 * The web sources of one knowledge base, kept in its index object's SQLite and advanced by that
 * object's alarm, one step at a time: a crawl reads PAGES_PER_STEP pages per step, and a source
 * with a rescrape frequency is crawled again when due. A re-scraped page whose text changed is
 * indexed as a new document that replaces the old one in the index in one transaction (for pages
 * of up to 1,000 chunks, one ingestion step); an unchanged page keeps its document; pages the
 * crawl no longer reaches are removed when it ends. A rescrape whose first page cannot be read
 * keeps everything and tries again a period later.
 */
export interface StoredPage {
  url: string;
  title: string;
  markdown: string;
}

/** The index object's side of a web source: where chunks go and how documents leave the index. */
export interface WebSourceIndex extends IngestTarget {
  deleteDocuments(documentIds: string[]): Promise<{ chunks: string[] }>;
}

/** Text one `CONTENT` crawl may gather (as a file's text is capped), past which the crawl ends. */
const MAX_CONTENT_CHARS = 32 * 1024 * 1024;

export class WebSources {
  constructor(
    private readonly sql: SqlStorage,
    private readonly env: Env,
    private readonly index: WebSourceIndex,
  ) {}

  register(record: WebSourceRecord, pages: StoredPage[], now: number): void {
    for (const [i, page] of pages.entries())
      this.sql.exec(
        "INSERT OR REPLACE INTO web_source_pages (source_id, position, page) VALUES (?, ?, ?)",
        record.id,
        i,
        JSON.stringify(page),
      );
    this.save(record, now);
  }

  /** Sources kept: crawls in progress and sources re-scraped. */
  count(): number {
    return this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM web_sources").one().n;
  }

  /** Whether a crawl is in progress (its next step should run at once). */
  crawling(): boolean {
    return this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM web_sources WHERE crawling = 1").one().n > 0;
  }

  /** When the next rescrape is due, if any. */
  nextDue(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT min(next_at) AS at FROM web_sources WHERE crawling = 0").one()
      .at;
  }

  /** Runs one step: the next page batch of a crawl in progress, else the start of a due rescrape. */
  async step(now: number): Promise<void> {
    const row =
      this.sql.exec<{ record: string }>("SELECT record FROM web_sources WHERE crawling = 1 LIMIT 1").toArray()[0] ??
      this.sql
        .exec<{ record: string }>(
          "SELECT record FROM web_sources WHERE crawling = 0 AND next_at <= ? ORDER BY next_at LIMIT 1",
          now,
        )
        .toArray()[0];
    if (!row) return;
    const record = JSON.parse(row.record) as WebSourceRecord;
    const kb = (
      await database(this.env).select().from(knowledgeBases).where(eq(knowledgeBases.id, record.kbId)).limit(1)
    )[0];
    if (!kb) {
      this.remove(record.id);
      return;
    }
    const fetchImpl = webFetch(this.env);
    if (!record.crawl) {
      try {
        const started = await startCrawl(record.url, record.limit, fetchImpl);
        record.crawl = started.state;
        record.crawlDocuments = {};
        await this.accept(record, kb, [started.page]);
      } catch {
        this.save({ ...record, crawl: null }, now);
        return;
      }
    } else {
      await this.accept(record, kb, await crawlStep(record.crawl, PAGES_PER_STEP, fetchImpl));
    }
    if ((record.crawl !== null && crawlFinished(record.crawl)) || this.contentChars(record.id) > MAX_CONTENT_CHARS)
      await this.finish(record, kb);
    if (record.crawl === null && RESCRAPE_PERIOD_MS[record.frequency] === null) this.remove(record.id);
    else this.save(record, now);
  }

  private auth(record: WebSourceRecord): AuthContext {
    // The user who added the source; only the audit log reads it.
    return { userId: record.userId, orgId: record.orgId, role: "member", via: "token" };
  }

  private async accept(record: WebSourceRecord, kb: KnowledgeBaseRow, pages: StoredPage[]): Promise<void> {
    if (record.returnType === "CONTENT") {
      const next = this.sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM web_source_pages WHERE source_id = ?", record.id)
        .one().n;
      for (const [i, page] of pages.entries())
        this.sql.exec(
          "INSERT OR REPLACE INTO web_source_pages (source_id, position, page) VALUES (?, ?, ?)",
          record.id,
          next + i,
          JSON.stringify(page),
        );
      return;
    }
    for (const page of pages) {
      const old = record.documents[page.url];
      const id = await indexOne(
        this.env,
        this.auth(record),
        kb,
        pagesToDocuments([page], "CHUNKS")[0],
        record.settings,
        { target: this.index, replaces: old ? [old] : [] },
      );
      record.crawlDocuments[page.url] = id;
    }
  }

  private contentChars(sourceId: string): number {
    return (
      this.sql
        .exec<{ n: number | null }>("SELECT sum(length(page)) AS n FROM web_source_pages WHERE source_id = ?", sourceId)
        .one().n ?? 0
    );
  }

  private async finish(record: WebSourceRecord, kb: KnowledgeBaseRow): Promise<void> {
    if (record.returnType === "CONTENT") {
      const pages = this.sql
        .exec<{ page: string }>("SELECT page FROM web_source_pages WHERE source_id = ? ORDER BY position", record.id)
        .toArray()
        .map((r) => JSON.parse(r.page) as StoredPage);
      this.sql.exec("DELETE FROM web_source_pages WHERE source_id = ?", record.id);
      const doc = pagesToDocuments(pages, "CONTENT")[0];
      const placeholder = record.contentDocument
        ? (
            await database(this.env)
              .select({ id: kbDocuments.id })
              .from(kbDocuments)
              .where(eq(kbDocuments.id, record.contentDocument))
              .limit(1)
          )[0]
        : undefined;
      if (record.contentDocument && !placeholder) {
        // Its document was deleted during the crawl: nothing to fill, and no chunks without a document.
        record.crawlDocuments = {};
      } else if (record.contentDocument) {
        await database(this.env)
          .update(kbDocuments)
          .set({ size: doc.size, updatedAt: new Date().toISOString() })
          .where(eq(kbDocuments.id, record.contentDocument));
        await ingestDocument(this.env, kb, record.contentDocument, doc, record.settings, { target: this.index });
        record.crawlDocuments = { [record.url]: record.contentDocument };
      } else {
        const old = Object.values(record.documents);
        record.crawlDocuments = {
          [record.url]: await indexOne(this.env, this.auth(record), kb, doc, record.settings, {
            target: this.index,
            replaces: old,
          }),
        };
      }
    }
    const kept = new Set(Object.values(record.crawlDocuments));
    await this.removeDocuments(
      kb.id,
      Object.values(record.documents).filter((id) => !kept.has(id)),
    );
    record.documents = record.crawlDocuments;
    record.crawlDocuments = {};
    record.crawl = null;
    record.contentDocument = null;
  }

  /** Documents a rescrape replaced or no longer reaches: their rows, files and any chunks left. */
  private async removeDocuments(kbId: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const db = database(this.env);
    const rows = await db
      .select()
      .from(kbDocuments)
      .where(and(eq(kbDocuments.kbId, kbId), inArray(kbDocuments.id, ids)));
    const { chunks } = await this.index.deleteDocuments(ids);
    const vectorize = vectorIndexFor(this.env, kbId);
    if (vectorize && chunks.length) await vectorize.deleteByIds(chunks);
    await deleteFiles(
      this.env,
      rows.map((r) => r.r2Key),
    );
    await db.delete(kbDocuments).where(and(eq(kbDocuments.kbId, kbId), inArray(kbDocuments.id, ids)));
  }

  private save(record: WebSourceRecord, now: number): void {
    const period = RESCRAPE_PERIOD_MS[record.frequency];
    const nextAt = record.crawl || period === null ? null : now + period;
    this.sql.exec(
      "INSERT OR REPLACE INTO web_sources (id, record, crawling, next_at) VALUES (?, ?, ?, ?)",
      record.id,
      JSON.stringify(record),
      record.crawl ? 1 : 0,
      nextAt,
    );
  }

  private remove(id: string): void {
    this.sql.exec("DELETE FROM web_sources WHERE id = ?", id);
    this.sql.exec("DELETE FROM web_source_pages WHERE source_id = ?", id);
  }
}
