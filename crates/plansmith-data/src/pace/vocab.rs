//! The Pace entity and phrase vocabulary. Entity categories are disjoint (case-insensitively),
//! so a label always has the same entity type; no free-text value ends with a word the
//! request wrappers append (`please`, `thanks`, `now`, ...).

pub const APPS: &[&str] = &[
    "Safari", "Google Chrome", "Firefox", "Slack", "Spotify", "Zoom", "Notes", "Reminders",
    "Finder", "Terminal", "Xcode", "Visual Studio Code", "Photoshop", "Figma", "Discord",
    "WhatsApp", "Telegram", "Signal", "Microsoft Word", "Excel", "PowerPoint", "Keynote",
    "Pages", "Maps", "Photos", "Music", "Podcasts", "App Store", "System Settings", "Preview",
    "TextEdit", "Calculator", "Obsidian", "Notion", "Trello", "Todoist", "1Password", "Dropbox",
    "Steam", "VLC", "Audacity", "GarageBand", "iMovie", "Final Cut Pro", "Blender", "Postman",
    "Outlook", "Microsoft Teams", "Evernote", "Kindle", "Activity Monitor", "Disk Utility",
    "QuickTime Player", "Brave", "Thunderbird", "LibreOffice", "GIMP", "Sublime Text",
    "IntelliJ IDEA", "Android Studio", "Zotero", "Anki", "Netflix", "Calendar", "FaceTime",
    "Weather", "Clock", "Books", "Stocks", "Voice Memos",
];

pub const FILE_STEMS: &[&str] = &[
    "report", "budget_2024", "notes", "resume", "invoice_0423", "meeting-notes", "photo",
    "vacation", "presentation", "thesis_draft", "todo", "README", "index", "main", "config",
    "data", "contract", "proposal", "slides", "recipe", "letter", "receipt", "tax_return",
    "playlist", "screenshot", "logo", "banner", "backup", "Q3_results", "roadmap", "agenda",
    "minutes", "cover_letter", "styles", "app", "lib", "schema", "export", "draft_v2",
    "family_photo", "lecture3", "homework1",
];

pub const FILE_EXTS: &[&str] = &[
    "pdf", "docx", "xlsx", "txt", "md", "png", "jpg", "csv", "pptx", "mp3", "zip", "json", "py",
    "rs", "html",
];

pub const FOLDERS: &[&str] = &[
    "Downloads", "Documents", "Desktop", "Projects", "Old Stuff", "Invoices", "Homework",
    "Screenshots", "Work", "Personal", "Backups", "Taxes 2023", "Receipts", "Wallpapers",
    "Client Files", "Recordings", "Shared", "Design Assets", "Thesis", "Travel",
];

pub const URLS: &[&str] = &[
    "github.com", "news.ycombinator.com", "wikipedia.org", "docs.rs", "youtube.com",
    "gmail.com", "amazon.com", "nytimes.com", "bbc.co.uk", "reddit.com", "stackoverflow.com",
    "example.com", "maps.google.com", "weather.com", "espn.com", "linkedin.com", "x.com",
    "netflix.com", "crates.io", "rust-lang.org", "python.org", "arxiv.org", "medium.com",
    "theverge.com", "duckduckgo.com", "twitch.tv", "imdb.com", "booking.com", "airbnb.com",
    "etsy.com", "ebay.com", "paypal.com", "dropbox.com", "notion.so", "figma.com",
    "https://openai.com", "https://example.org/login", "https://docs.python.org/3",
    "https://mail.google.com", "https://calendar.google.com", "developer.mozilla.org",
    "huggingface.co", "kaggle.com", "coursera.org", "khanacademy.org", "npmjs.com",
];

/// Clickable UI labels (buttons, tabs, menu items, icons).
pub const UI_LABELS: &[&str] = &[
    "Save", "Save As", "Cancel", "Submit", "Send", "OK", "Apply", "Next", "Previous", "Back",
    "Continue", "Sign in", "Sign out", "Log in", "Create account", "Forgot password", "Reply",
    "Reply all", "Forward", "Move to Trash", "Upload", "Share", "Copy link", "Add to cart",
    "Checkout", "Buy now", "Subscribe", "Unsubscribe", "Accept", "Decline", "Accept all cookies",
    "Mute", "Unmute", "Start recording", "Stop sharing", "Leave meeting", "Join meeting",
    "New tab", "New folder", "New message", "Compose", "Filter", "Sort by date", "Refresh",
    "Close", "Minimize", "Maximize", "Help", "About", "Edit profile", "Upload photo", "Play",
    "Pause", "Skip", "Shuffle", "Repeat", "Like", "Bookmark", "Print", "Export", "Import",
    "Undo", "Redo", "Bold", "Italic", "Underline", "Insert table", "Add comment", "Resolve",
    "Approve", "Request changes", "Merge pull request", "Run", "Debug", "Stop", "Build",
    "Deploy", "Publish", "Schedule send", "Attach file", "Insert image", "Zoom in", "Zoom out",
    "Fullscreen", "Settings", "Notifications", "Account", "Profile", "Explore",
    "Sidebar", "Toolbar", "Downloads list", "Extensions", "Advanced", "General", "Privacy",
    "Dashboard", "Favorites",
];

/// Text fields (also `ui_element`), the targets of `type`.
pub const FIELDS: &[&str] = &[
    "Search", "Email address", "Password", "Username", "Subject", "Message body", "Comment",
    "Address bar", "Full name", "Phone number", "Coupon code", "Zip code", "Title",
    "Description", "Caption", "URL", "First name", "Last name", "Company", "City", "Reply box",
    "Chat input", "Notes field", "Amount", "Promo code",
];

pub const WINDOWS: &[&str] = &[
    "Inbox", "Untitled", "Untitled 2", "Terminal 1", "Project Settings", "Preferences",
    "Find and Replace", "Quick Look", "Picture in Picture", "Console", "Library", "Team chat",
    "Daily standup", "Budget review", "Sprint board", "Mini Player", "Developer Tools",
    "Print preview", "Color picker", "Font panel", "Character viewer", "Task list", "Transfers",
    "Bookmarks", "History", "Downloads manager", "Source Control", "Network inspector",
    "Now Playing", "Private browsing",
];

pub const FIRST_NAMES: &[&str] = &[
    "Anna", "Ben", "Carlos", "Dana", "Elena", "Farah", "George", "Hana", "Ivan", "Julia",
    "Kofi", "Laura", "Mateo", "Nina", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma",
    "Victor", "Wei", "Ximena", "Yusuf", "Zoe", "Liam", "Mia", "Noah", "Olivia", "Aiko",
    "Bruno", "Chloe", "Dmitri", "Esther", "Felix",
];

pub const LAST_NAMES: &[&str] = &[
    "Lee", "Carter", "Ruiz", "Petrova", "Khan", "Smith", "Kim", "Novak", "Okafor", "Rossi",
    "Nguyen", "Garcia", "Müller", "Silva", "Cohen", "Tanaka", "Brown", "Haddad",
];

pub const FAMILY: &[&str] = &["Mom", "Dad", "Grandma", "Grandpa", "Aunt Sue", "Uncle Bob"];

/// Words and phrases on screen (entity type `text`).
pub const SCREEN_TEXTS: &[&str] = &[
    "quarterly results", "Terms of Service", "budget", "deadline", "Chapter 3", "total",
    "shipping address", "lorem ipsum", "the first paragraph", "introduction", "conclusion",
    "error message", "tracking number", "confirmation code", "summary", "Step 2", "headline",
    "price", "due date", "footnote", "warranty", "refund policy", "abstract", "signature",
];

/// Things to type or say (free text). None contains `in`, `into`, `with` or `to` at a word
/// boundary, so the end of the text is never ambiguous.
pub const TEXTS: &[&str] = &[
    "hello world", "see you soon", "good morning everyone", "happy birthday", "I'll be right back",
    "on my way", "sounds good", "let's meet at noon", "running late", "call me back",
    "the meeting is canceled", "great job team", "welcome aboard", "I agree", "no worries",
    "dinner is ready", "hello there", "how are you", "john.smith@example.com", "Password123",
    "order 4521", "Berlin", "New York", "fix login bug", "lunch at 1", "yes", "maybe later",
    "thank you all for coming", "count me", "done for today", "be right there", "got it",
    "merry christmas", "the quick brown fox", "see attached", "ok", "42", "Main Street 12",
    "what time is it", "good night", "well done", "I love this song", "bonjour", "cheers",
    "almost ready", "happy new year", "stay safe", "hurry up", "sorry for the delay",
    "let's go", "it's raining", "bring snacks", "who's ready", "drive safely",
];

pub const KEYS: &[&str] = &[
    "cmd+s", "cmd+c", "cmd+v", "cmd+z", "cmd+shift+z", "ctrl+z", "ctrl+c", "ctrl+v",
    "ctrl+shift+t", "alt+tab", "cmd+tab", "cmd+shift+4", "enter", "escape", "tab", "space",
    "backspace", "delete", "F5", "F11", "shift+enter", "cmd+w", "cmd+q", "cmd+t", "cmd+n",
    "ctrl+alt+delete", "home", "end", "page down", "page up", "cmd+f", "ctrl+f", "cmd+a",
    "ctrl+a", "cmd+option+esc", "return", "up arrow", "down arrow", "left arrow", "right arrow",
];

pub const TOGGLE_SETTINGS: &[&str] = &[
    "Wi-Fi", "wifi", "Bluetooth", "dark mode", "do not disturb", "airplane mode", "night shift",
    "location services", "auto-brightness", "hotspot", "low power mode", "closed captions",
    "focus mode", "notifications", "silent mode", "auto-correct", "VPN", "screen reader",
    "keyboard backlight", "autoplay", "spell check", "true tone", "voice control",
];

pub const LEVEL_SETTINGS: &[&str] = &[
    "volume", "brightness", "keyboard brightness", "font size", "text size", "zoom",
    "alarm volume", "ringer volume", "microphone volume", "fan speed", "mouse speed",
    "screen brightness", "media volume", "bass", "treble", "balance", "contrast",
    "cursor size", "scroll speed", "key repeat rate",
];

pub const LEVEL_WORDS: &[&str] = &[
    "ten", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    "twenty five", "seventy five", "a hundred", "max", "maximum", "minimum", "half", "low",
    "medium", "high", "zero",
];

/// Settings with named choices: (setting, values).
pub const CHOICE_SETTINGS: &[(&str, &[&str])] = &[
    ("theme", &["light", "dark", "auto", "high contrast"]),
    ("language", &["French", "Spanish", "German", "Japanese", "English", "Portuguese"]),
    ("wallpaper", &["ocean", "mountains", "solid black", "the sunset photo"]),
    ("time zone", &["Pacific Time", "UTC", "Central European Time", "Tokyo time"]),
    ("default browser", &["Firefox", "Chrome", "Safari"]),
    ("keyboard layout", &["Dvorak", "QWERTY", "AZERTY"]),
    ("screen resolution", &["1920x1080", "2560x1440", "the default"]),
    ("accent color", &["blue", "green", "purple", "orange", "graphite"]),
    ("screen timeout", &["5 minutes", "30 seconds", "never", "1 minute"]),
    ("playback speed", &["1.5x", "2x", "normal"]),
    ("ringtone", &["Marimba", "Chimes", "Radar"]),
    ("temperature unit", &["Celsius", "Fahrenheit"]),
];

pub const WEB_QUERIES: &[&str] = &[
    "best pizza near me", "rust borrow checker", "weather in Paris", "how tall is Mount Everest",
    "cheap flights Lisbon", "python list comprehension", "symptoms of flu", "the population of Canada",
    "how to boil an egg", "used bikes", "train times Berlin Hamburg", "movie times tonight",
    "vegan lasagna recipe", "the exchange rate euro dollar", "latest iPhone reviews",
    "who won the game last night", "hiking trails nearby", "how to tie a tie",
    "the capital of Australia", "noise cancelling headphones", "museum opening hours",
    "jazz concerts this weekend", "how to center a div", "sourdough starter",
];

pub const CALENDAR_QUERIES: &[&str] = &[
    "dentist appointment", "team standup", "next week", "tomorrow", "Friday", "the offsite",
    "my flight", "the board meeting", "Anna's party", "the school play", "this afternoon",
    "the budget review", "yoga class", "the haircut", "lunch with Ben", "the weekend",
];

pub const EMAIL_QUERIES: &[&str] = &[
    "the invoice", "flight confirmation", "the contract", "the job offer", "shipping updates",
    "the quarterly report", "the wedding", "password reset", "the conference", "the lease",
    "receipts", "the project update", "the newsletter", "tickets",
];

pub const SCREEN_QUERIES: &[&str] = &[
    "the login button", "the price", "my order number", "the download link", "the error",
    "the total", "the word budget", "the search box", "the next page link", "the date",
];

pub const MEMORY_QUERIES: &[&str] = &[
    "my locker code", "Anna's birthday", "my parking spot", "the wifi password",
    "my favorite restaurant", "my shoe size", "the garage code", "my doctor's name",
    "my license plate", "my blood type", "the name of that book",
    "my passport number", "Ben's address", "my gym schedule", "the restaurant Dana recommended",
    "my coffee order", "the hotel we stayed at", "my allergies", "my sister's kids' names",
    "the password hint", "my seat number", "the plumber's number", "my anniversary",
];

pub const COMPOSE_TOPICS: &[&str] = &[
    "the quarterly budget", "the team offsite", "lunch on Friday", "the project timeline",
    "my vacation plans", "the new hire", "the broken printer", "the product launch",
    "the holiday party", "our trip", "the rent increase", "the book club",
    "the marketing plan", "the kitchen renovation", "the conference talk", "the hiring plan",
    "the weekend hike", "the school fundraiser", "last night's game", "the new office",
    "the garden", "the sprint retro", "the birthday surprise", "the move",
];

pub const COMPOSE_MESSAGES: &[&str] = &[
    "I'm running late", "the meeting moved", "dinner is at seven", "I got the tickets",
    "the package arrived", "I'll call later", "we won", "the kids are asleep",
    "I finished the report", "the car is ready", "I miss you", "the flight landed",
    "practice is canceled", "I'll bring dessert", "the door code changed", "rent is paid",
];

pub const WAIT_CONDITIONS: &[&str] = &[
    "the download finishes", "the page loads", "Anna replies", "the build is done",
    "the upload completes", "the video ends", "the meeting starts", "the battery is full",
    "the file is saved", "the printer is ready", "the installer finishes", "the call ends",
    "the timer goes off", "the tests pass", "the export is done", "Ben comes online",
    "the update installs", "the song ends", "the sync completes", "the kettle boils",
    "5 pm", "noon", "the rain stops",
];

pub const SCHEDULE_WHATS: &[&str] = &[
    "call Mom", "take out the trash", "pay rent", "water the plants", "submit the report",
    "book a dentist appointment", "buy milk", "stretch", "check the oven", "feed the cat",
    "renew my passport", "send the invoice", "pick up the kids", "back up my laptop",
    "walk the dog", "drink water", "review the slides", "charge my phone", "cancel the trial",
    "order flowers", "return the library books", "pack my gym bag", "email the landlord",
    "take my vitamins", "stand up", "check the mail",
];

/// (when phrase, may follow `for`): "schedule X for tomorrow" but not "for at 5pm".
pub const SCHEDULE_WHENS: &[(&str, bool)] = &[
    ("at 5pm", false), ("at noon", false), ("tomorrow morning", true), ("tonight", true),
    ("in 10 minutes", false), ("in an hour", false), ("on Friday", false), ("next Monday", true),
    ("at 7:30", false), ("tomorrow at 9", true), ("this evening", true), ("in 2 hours", false),
    ("on Sunday afternoon", false), ("next week", true), ("at 8 am", false),
    ("in 30 minutes", false), ("Saturday morning", true), ("at midnight", false),
    ("the day after tomorrow", true), ("on March 3rd", false), ("every morning", false),
    ("every Monday at 10", false), ("at lunchtime", false), ("end of the day", true),
];

/// Things too risky to do without asking: confirmation clarifications (`{f}` file,
/// `{c}` contact, `{a}` app, `{w}` window placeholders).
pub const DESTRUCTIVE: &[&str] = &[
    "delete it", "delete this", "delete {f}", "delete the file {f}", "erase {f}",
    "permanently delete {f}", "empty the trash", "remove {c} from my contacts",
    "delete {c} from my contacts", "uninstall {a}", "factory reset this device",
    "wipe my calendar", "clear my browsing history", "delete all my emails", "send it",
    "close {w} without saving", "quit {a} without saving", "format the disk",
    "cancel my subscription", "delete the {d} folder", "erase everything", "discard my changes",
    "unsend the message", "reset all settings", "delete my account", "remove everything from {d}",
    "overwrite {f}", "block {c}", "sign out everywhere", "delete all photos",
];

/// Requests that name what to do but not the thing: missing-value clarifications.
pub const MISSING: &[&str] = &[
    "open the file", "open a file", "open the app", "open the website", "open that",
    "open it", "click the button", "click it", "click that", "type something",
    "type the text", "press the key", "press the shortcut", "scroll", "drag it",
    "drag the file", "hover over it", "set the volume", "change the brightness",
    "set the {s}", "change the {s}", "adjust the {s}", "remind me", "remind me later",
    "remind me {t}", "set a reminder {t}",
    "remind me to {w}", "set a reminder", "schedule something", "wait", "wait a bit",
    "write an email to {c}", "send a message to {c}", "reply to {c}", "write a note",
    "take a note", "search for something", "look it up", "say something", "tell them",
    "open the window", "open the link", "go to the website", "switch to the window",
    "launch the app", "find it in my emails", "remember this",
];
