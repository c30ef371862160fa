-- The book around the chapters, from the page lists that book/Tupfile.lua
-- passes as -M chapters="01-cancellation 02-layernorm ..." and
-- -M appendices="how-it-is-made ...", each in reading order:
--   a page (-M page=NAME) gets its label (Chapter 1, Appendix A) and
--   previous/next links, the chapters first, then the appendices;
--   the index gets its table of contents, at the end of its div .contents;
--   the EPUB is the index's text followed by every page.
-- A chapter's number comes from its directory (01-cancellation is Chapter 1),
-- its title from its chapter.md front matter, its page is NAME.html, and the
-- filtered chapter (includes and runs done) is build/NAME.json. An appendix
-- is book/appendix/NAME.md, lettered in order, its page NAME.html.
local chapter = require 'filters.chapter'
local answers = require 'filters.answers'

-- A page's Markdown as written (its title is needed before it is built).
local function source(page)
  local doc = chapter.read(page.path)
  if not doc.meta.title then
    chapter.fail('book', { page.path .. ' has no "title:" in its front matter' })
  end
  return doc
end

-- A page as the book shows it: filtered (includes and runs done) for a
-- chapter, as written for an appendix.
local function built(page)
  return chapter.read(page.built, page.built:match('%.json$') and 'json' or 'markdown')
end

local function link(page)
  return page and { href = page.href, label = page.label, title = source(page).meta.title }
end

local function heading(page, doc_title)
  return pandoc.Header(1, { pandoc.Str(page.label .. '.'), pandoc.Space(), table.unpack(doc_title) },
                       pandoc.Attr(page.prefix))
end

local function is_chapter(page)
  return page.number ~= nil
end

local function answers_page(pages)
  for _, page in ipairs(pages) do
    if page.name == answers.APPENDIX then return page end
  end
  chapter.fail('book', { 'the appendix "' .. answers.APPENDIX .. '", which holds the answers, is not in the page lists' })
end

-- The answers of every chapter, for the appendix's `::: answers` div. A
-- link in a page is to NAME.html#id; in the EPUB, one document, to #id.
local function every_answer(pages, href)
  local blocks = {}
  for _, page in ipairs(pages) do
    if is_chapter(page) then
      local _, taken = answers.take(built(page).blocks, page, function(id) return id end)
      for _, block in ipairs(answers.page(page, source(page).meta.title, taken, href)) do
        table.insert(blocks, block)
      end
    end
  end
  return blocks
end

-- The blocks with the `::: answers` div, if there is one, filled.
local function fill_answers(blocks, filling)
  local filled = {}
  for i, block in ipairs(blocks) do
    filled[i] = answers.is_placeholder(block) and pandoc.Div(filling(), block.attr) or block
  end
  return filled
end

local function page_of_book(doc, pages, name)
  for i, page in ipairs(pages) do
    if page.name == name then
      if is_chapter(page) then
        local href = answers_page(pages).href
        doc.blocks = answers.take(doc.blocks, page, function(id) return href .. '#' .. id end)
      end
      doc.blocks = fill_answers(doc.blocks, function()
        return every_answer(pages, function(target, id) return target.href .. '#' .. id end)
      end)
      doc.meta.label = page.label
      doc.meta.prev = link(pages[i - 1])
      doc.meta.next = link(pages[i + 1])
      return doc
    end
  end
  chapter.fail('book', { name .. ' is not in the page lists' })
end

-- Pages and their sections, each a link into its page.
local function contents(pages)
  local items = {}
  for _, ch in ipairs(pages) do
    local doc = source(ch)
    local sections = {}
    for _, block in ipairs(doc.blocks) do
      if block.t == 'Header' and block.level == 2 then
        local target = ch.href .. '#' .. block.identifier
        table.insert(sections, { pandoc.Plain({ pandoc.Link(block.content, target) }) })
      end
    end
    local entry = pandoc.Link(heading(ch, doc.meta.title).content, ch.href)
    table.insert(items, { pandoc.Plain({ entry }), pandoc.BulletList(sections) })
  end
  return pandoc.BulletList(items)
end

local function is_contents(block)
  return block.t == 'Div' and block.classes:includes('contents')
end

local function index(doc, pages)
  return doc:walk({
    Div = function(div)
      if is_contents(div) then div.content:insert(contents(pages)) end
      return div
    end,
  })
end

-- The EPUB is one document, where every chapter has its "exercises" and
-- "references": the ids of a page become PREFIX-id (chapter-2-exercises),
-- and the links into the pages of the book (#id, NAME.html#id, NAME.html)
-- follow them, so that no link lands in another page's section of the same
-- name. `own` is the page the blocks come from, nil for the index.
local function into_one_document(blocks, pages, own)
  local prefixes = {}
  for _, page in ipairs(pages) do prefixes[page.name] = page.prefix end
  local own_prefix = own and own.prefix
  local function prefixed(prefix, id) return prefix and prefix .. '-' .. id or id end
  local function rename(element)
    if element.identifier and element.identifier ~= '' then
      element.identifier = prefixed(own_prefix, element.identifier)
      return element
    end
  end
  local function retarget(link)
    local page, id = link.target:match('^([%w_.-]+)%.html#?(.*)$')
    if page and id == '' then
      link.target = '#' .. (prefixes[page] or '')
    elseif page then
      link.target = '#' .. prefixed(prefixes[page], id)
    elseif link.target:match('^#') then
      link.target = '#' .. prefixed(own_prefix, link.target:sub(2))
    end
    rename(link)
    return link
  end
  return pandoc.walk_block(pandoc.Div(blocks), { Block = rename, Inline = rename, Link = retarget }).content
end

-- Links between pages are written as on the web (NAME.html#id), then made
-- links within the one document by into_one_document.
local function epub(doc, pages)
  local blocks = { pandoc.Header(1, doc.meta.title) }
  for _, block in ipairs(doc.blocks) do
    if not is_contents(block) then
      table.insert(blocks, block)
    end
  end
  blocks = into_one_document(blocks, pages, nil)
  local answers_href = answers_page(pages).href
  local taken = {}
  for _, page in ipairs(pages) do
    table.insert(blocks, heading(page, source(page).meta.title))
    local page_blocks = built(page).blocks
    if is_chapter(page) then
      local answered
      page_blocks, answered = answers.take(page_blocks, page, function(id) return answers_href .. '#' .. id end)
      local back = function(target, id) return target.href .. '#' .. id end
      for _, block in ipairs(answers.page(page, source(page).meta.title, answered, back)) do
        table.insert(taken, block)
      end
    end
    page_blocks = fill_answers(page_blocks, function() return taken end)
    for _, block in ipairs(into_one_document(page_blocks, pages, page)) do
      table.insert(blocks, block)
    end
  end
  doc.meta.title = doc.meta['book-title']
  return pandoc.Pandoc(blocks, doc.meta)
end

function Pandoc(doc)
  local pages = chapter.list(doc.meta)
  if doc.meta.page then
    return page_of_book(doc, pages, pandoc.utils.stringify(doc.meta.page))
  elseif FORMAT:match('epub') then
    return epub(doc, pages)
  end
  return index(doc, pages)
end
