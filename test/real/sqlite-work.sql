-- The sqlite3 workload of the real-programs test.  run.sh replaces @ROWS@
-- (number of orders; customers are @ROWS@/10) and runs it with the sqlite3
-- shell on a fresh database file, once plainly and once preloaded; the
-- output must be identical.  Everything is computed from row numbers, and
-- every query that prints rows has an ORDER BY, so the output is fixed.
.bail on
.headers on
.mode list
PRAGMA journal_mode = WAL;
PRAGMA cache_size = -32000;

CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL, region INTEGER NOT NULL, since INTEGER NOT NULL);
CREATE TABLE product(id INTEGER PRIMARY KEY, title TEXT NOT NULL, price INTEGER NOT NULL);
CREATE TABLE orders(id INTEGER PRIMARY KEY, cust INTEGER NOT NULL REFERENCES customer(id),
                    prod INTEGER NOT NULL REFERENCES product(id), qty INTEGER NOT NULL, note TEXT);

BEGIN;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < @ROWS@ / 10)
INSERT INTO customer SELECT x, printf('customer-%06d-%s', x, hex(x * 7919)), x % 23, 2000 + x % 25 FROM n;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 500)
INSERT INTO product SELECT x, 'product ' || substr('abcdefghijklmnopqrstuvwxyz', x % 26 + 1, 1 + x % 9) || ' #' || x, 100 + (x * 37) % 9900 FROM n;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < @ROWS@)
INSERT INTO orders SELECT x, (x * 7919) % (@ROWS@ / 10) + 1, (x * 104729) % 500 + 1, 1 + (x * 31) % 17,
       CASE WHEN x % 5 = 0 THEN NULL ELSE printf('note %d: %s', x, substr('the quick brown fox jumps over the lazy dog', 1 + x % 30, 5 + x % 11)) END FROM n;
COMMIT;

CREATE INDEX orders_cust ON orders(cust);
CREATE INDEX orders_prod_qty ON orders(prod, qty);
CREATE INDEX customer_region ON customer(region, since);

SELECT 'rows', (SELECT count(*) FROM customer), (SELECT count(*) FROM product), (SELECT count(*) FROM orders);

-- joins and grouping
SELECT c.region, count(*) AS orders, sum(o.qty) AS items, sum(o.qty * p.price) AS revenue,
       printf('%.3f', avg(o.qty * p.price)) AS avg_value
FROM orders o JOIN customer c ON c.id = o.cust JOIN product p ON p.id = o.prod
GROUP BY c.region ORDER BY c.region;

SELECT c.id, c.name, sum(o.qty * p.price) AS spent
FROM customer c JOIN orders o ON o.cust = c.id JOIN product p ON p.id = o.prod
GROUP BY c.id ORDER BY spent DESC, c.id LIMIT 10;

SELECT p.id, p.title, count(o.id) AS n, total(o.qty) AS q
FROM product p LEFT JOIN orders o ON o.prod = p.id
GROUP BY p.id HAVING n > 0 ORDER BY q DESC, p.id LIMIT 10;

-- window functions, string work, group_concat on a subset
SELECT region, since, cnt, rank() OVER (PARTITION BY region ORDER BY cnt DESC, since) AS rk
FROM (SELECT region, since, count(*) AS cnt FROM customer GROUP BY region, since)
WHERE region < 3 ORDER BY region, rk LIMIT 30;

SELECT length(group_concat(note, '|')), count(DISTINCT substr(note, -5)) FROM (SELECT note FROM orders WHERE id % 97 = 0 ORDER BY id);

-- updates and deletes
BEGIN;
UPDATE orders SET qty = qty * 2, note = upper(note) WHERE id % 7 = 0;
DELETE FROM orders WHERE (id * 13) % 11 = 0;
UPDATE customer SET region = (region + 5) % 23 WHERE id % 9 = 0;
DELETE FROM customer WHERE id % 101 = 0 AND id NOT IN (SELECT cust FROM orders);
COMMIT;

SELECT 'after changes', (SELECT count(*) FROM customer), (SELECT count(*) FROM orders), (SELECT sum(qty) FROM orders);

SELECT c.region, count(*), sum(o.qty), min(o.note), max(o.note)
FROM orders o JOIN customer c ON c.id = o.cust
GROUP BY c.region ORDER BY c.region;

-- a temporary table and a self-join
CREATE TEMP TABLE top AS
  SELECT cust, sum(qty) AS q FROM orders GROUP BY cust ORDER BY q DESC, cust LIMIT 200;
SELECT count(*), sum(a.q), max(a.cust - b.cust) FROM top a JOIN top b ON b.q = a.q AND b.cust > a.cust;

-- rebuild and check
REINDEX;
VACUUM;
PRAGMA integrity_check;
PRAGMA foreign_key_check;
SELECT 'checksum', sum(id * 31 + qty) % 1000000007, sum(length(note)) FROM orders;
