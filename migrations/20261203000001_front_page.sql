-- What the visitors' front page says of the owner: a name and a short introduction in
-- Markdown, set by an admin on /admin/account. One row at most; without it the page
-- shows a neutral heading and the ways in.
CREATE TABLE front_page (
    id           smallint    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    owner_name   text        NOT NULL CHECK (char_length(owner_name) BETWEEN 1 AND 200),
    introduction text        NOT NULL DEFAULT '' CHECK (char_length(introduction) <= 4000),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
