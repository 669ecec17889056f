#!/usr/bin/env python3
"""Writes the hand-written evaluation sets as BFCL v4 files (question file + possible answers).

The requests and their gold calls below were written by hand, on 2026-12-03, before any
training for the generalist or realism issues, and must never be trained on or used to tune a
data generator item by item (see README.md). This script only serializes them:

    python3 eval/handwritten/make.py      # rewrites BFCL_v4_handwritten_*.json here

Gold follows BFCL's rules: every parameter the answer may carry is listed with its accepted
values; "" among them means the parameter may be left out; strings are compared the way BFCL
does (case, spaces and most punctuation ignored).
"""
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
PACE = json.loads((HERE.parent.parent / "examples/pace/tools.json").read_text())


def bfcl_types(schema):
    """BFCL writes Python type names: `dict` for objects, `float` for numbers."""
    if isinstance(schema, dict):
        out = {k: bfcl_types(v) for k, v in schema.items() if k != "additionalProperties"}
        if schema.get("type") == "object":
            out["type"] = "dict"
        elif schema.get("type") == "number":
            out["type"] = "float"
        return out
    if isinstance(schema, list):
        return [bfcl_types(v) for v in schema]
    return schema


DOCS = [bfcl_types(t["function"]) for t in PACE]


def ent(ty, *labels):
    """A target/destination entity: a type (or a tuple of acceptable types), any of the labels."""
    types = list(ty) if isinstance(ty, tuple) else [ty]
    return [{"type": types, "label": list(labels)}]


def perform(action, target=None, **extra):
    args = {"action": [action]}
    if target is not None:
        args["target"] = target
    for k, v in extra.items():
        args[k] = v if isinstance(v, list) else [v]
    return {"perform": args}


def set_(target, *values):
    return {"set": {"target": target if isinstance(target, list) else [target], "value": list(values)}}


def open_(ty, *labels):
    return {"open": {"target": ent(ty, *labels)}}


def query(source, mode, q=None):
    args = {"source": [source], "mode": mode if isinstance(mode, list) else [mode]}
    if q is not None:
        args["query"] = q if isinstance(q, list) else [q]
    return {"query": args}


def compose(fmt, content, recipient=None):
    args = {"format": fmt if isinstance(fmt, list) else [fmt],
            "content": content if isinstance(content, list) else [content]}
    if recipient is not None:
        args["recipient"] = recipient if isinstance(recipient, list) else [recipient]
    return {"compose": args}


def clarify(kind, question, choices=None):
    args = {"kind": [kind], "question": question if isinstance(question, list) else [question]}
    if choices is not None:
        args["choices"] = [choices]
    return {"clarify": args}


def say(*texts):
    return {"say": {"text": list(texts)}}


def memory(*q):
    return {"query_memory": {"query": list(q)}}


def wait(condition, timeout=None):
    args = {"condition": condition if isinstance(condition, list) else [condition]}
    if timeout is not None:
        args["timeout_seconds"] = [timeout]
    return {"wait": args}


def schedule(when, what):
    return {"schedule": {"when": when if isinstance(when, list) else [when],
                         "what": what if isinstance(what, list) else [what]}}


# Pace requests as people say them: fillers, politeness, typos, short and long, ALL CAPS,
# numbers as words. (request, [gold calls])
PACE_ITEMS = [
    # perform: click and friends
    ("click the blue Submit button", [perform("click", ent("ui_element", "blue Submit", "Submit"))]),
    ("um can you click on save", [perform("click", ent("ui_element", "save"))]),
    ("hit Send", [perform("click", ent("ui_element", "Send"))]),
    ("press the OK button please", [perform("click", ent("ui_element", "OK"))]),
    ("CLICK CANCEL", [perform("click", ent("ui_element", "CANCEL"))]),
    ("clik the Next button", [perform("click", ent("ui_element", "Next"))]),
    ("could you tap Accept All for me", [perform("click", ent("ui_element", "Accept All"))]),
    ("double click the Budget 2024.xlsx file", [perform("double_click", ent("file", "Budget 2024.xlsx"))]),
    ("double-click on the photos folder", [perform("double_click", ent("file", "photos"))]),
    ("right click the desktop icon for Spotify", [perform("right_click", ent(("app", "ui_element"), "Spotify"))]),
    ("right-click on notes.txt", [perform("right_click", ent("file", "notes.txt"))]),
    ("hover over the Settings gear", [perform("hover", ent("ui_element", "Settings"))]),
    ("move the mouse over Help", [perform("hover", ent("ui_element", "Help"))]),
    ("ok so click Sign in with Google", [perform("click", ent("ui_element", "Sign in with Google"))]),
    ("select the Remember me checkbox", [perform("click", ent("ui_element", "Remember me"))]),
    # perform: type
    ("type hello world", [perform("type", text="hello world")]),
    ("type in 'see you at 6'", [perform("type", text=["see you at 6", "'see you at 6'"])]),
    ("write thanks so much into the message box", [perform("type", ent("ui_element", "message"), text="thanks so much")]),
    ("enter my email jane.doe@example.com in the Email field", [perform("type", ent("ui_element", "Email"), text="jane.doe@example.com")]),
    ("TYPE ORDER NUMBER 4417", [perform("type", text=["ORDER NUMBER 4417", "4417"])]),
    ("put 221B Baker Street in the address field", [perform("type", ent("ui_element", "address"), text="221B Baker Street")]),
    ("can you type out lol that's hilarious", [perform("type", text="lol that's hilarious")]),
    ("search box: type cheap flights to lisbon", [perform("type", ent("ui_element", "search"), text="cheap flights to lisbon")]),
    # perform: keys
    ("press command shift four", [perform("key", keys=["command shift four", "cmd+shift+4"])]),
    ("hit escape", [perform("key", keys=["escape", "esc"])]),
    ("press cmd+s", [perform("key", keys="cmd+s")]),
    ("ctrl z", [perform("key", keys=["ctrl z", "ctrl+z"])]),
    ("hit enter please", [perform("key", keys=["enter", "return"])]),
    ("press control alt delete", [perform("key", keys=["control alt delete", "ctrl+alt+delete"])]),
    ("use the shortcut cmd c", [perform("key", keys=["cmd c", "cmd+c"])]),
    # perform: scroll
    ("scroll down", [perform("scroll", direction="down", amount=[""])]),
    ("scroll down 3 times", [perform("scroll", direction="down", amount=3)]),
    ("scroll down three times", [perform("scroll", direction="down", amount=3)]),
    ("scroll up a bit", [perform("scroll", direction="up", amount=[""])]),
    ("go to the bottom of the page", [perform("scroll", direction="down", amount=[""])]),
    ("scroll all the way to the top", [perform("scroll", direction="up", amount=[""])]),
    ("SCROLL DOWN 10", [perform("scroll", direction="down", amount=10)]),
    ("scrol left twice", [perform("scroll", direction="left", amount=2)]),
    ("could you scroll right 5 please", [perform("scroll", direction="right", amount=5)]),
    # perform: drag and multi-select
    ("drag report.pdf to the Archive folder", [perform("drag", ent("file", "report.pdf"), destination=ent("file", "Archive"))]),
    ("move the file invoice.docx into Documents", [perform("drag", ent("file", "invoice.docx"), destination=ent("file", "Documents"))]),
    ("drag the Chrome icon onto the dock", [perform("drag", ent(("app", "ui_element"), "Chrome"), destination=ent("ui_element", "dock"))]),
    ("select everything from row 2 to row 9", [perform("multi_select", ent("ui_element", "row 2"), destination=ent("ui_element", "row 9"))]),
    ("select a.png through f.png", [perform("multi_select", ent("file", "a.png"), destination=ent("file", "f.png"))]),
    # set
    ("turn on dark mode", [set_("dark mode", "on")]),
    ("switch dark mode off", [set_("dark mode", "off")]),
    ("set the volume to 40", [set_("volume", "40")]),
    ("volume to fifty percent please", [set_("volume", "fifty percent", "50%", "50 percent")]),
    ("turn the brightness up", [set_("brightness", "up")]),
    ("can you make the screen brighter", [set_(["screen brightness", "brightness"], "brighter", "up")]),
    ("mute", [set_(["volume", "sound", "mute"], "mute", "muted", "0", "off", "on")]),
    ("turn wifi off", [set_(["wifi", "wi-fi"], "off")]),
    ("TURN ON BLUETOOTH", [set_("BLUETOOTH", "ON")]),
    ("set brightness to 70%", [set_("brightness", "70%")]),
    ("put do not disturb on", [set_("do not disturb", "on")]),
    ("enable night shift", [set_("night shift", "on", "enabled", "enable")]),
    ("change the font size to 14", [set_("font size", "14")]),
    ("set the thermostat to seventy two", [set_("thermostat", "seventy two", "72")]),
    ("lower the volume a little", [set_("volume", "lower", "down", "a little lower")]),
    ("uh set my alarm volume to max", [set_("alarm volume", "max")]),
    ("turn off notifications", [set_("notifications", "off")]),
    ("switch the language to Spanish", [set_("language", "Spanish")]),
    ("set the timer sound to Chimes", [set_("timer sound", "Chimes")]),
    ("brightness 30", [set_("brightness", "30")]),
    # open
    ("open Safari", [open_("app", "Safari")]),
    ("launch spotify", [open_("app", "spotify")]),
    ("pls open slack", [open_("app", "slack")]),
    ("OPEN MAIL", [open_("app", "MAIL")]),
    ("can you open up the calculator app for me", [open_("app", "calculator")]),
    ("go to github.com", [open_("url", "github.com")]),
    ("open nytimes.com please", [open_("url", "nytimes.com")]),
    ("pull up the Q3 report.pdf", [open_("file", "Q3 report.pdf")]),
    ("open the contract draft", [open_("file", "contract draft")]),
    ("show me the Downloads folder", [open_("file", "Downloads")]),
    ("open the Privacy tab", [open_("ui_element", "Privacy")]),
    ("bring up the Inbox window", [open_("window", "Inbox")]),
    ("open Anna's contact card", [open_("contact", "Anna")]),
    ("start Zoom", [open_("app", "Zoom")]),
    ("opne terminal", [open_("app", "terminal")]),
    ("open settings", [open_("app", "settings")]),
    ("go to my calendar app", [open_("app", "calendar")]),
    ("navigate to docs.python.org", [open_("url", "docs.python.org")]),
    # query
    ("what's on my screen", [query("current_screen", "describe")]),
    ("describe what you see", [query("current_screen", "describe")]),
    ("what's on my calendar today", [query("calendar", ["read", "summarize"], ["today", ""])]),
    ("do i have any meetings tomorrow", [query("calendar", ["search", "read"], ["meetings tomorrow", "tomorrow", "meetings"])]),
    ("read my latest email", [query("email", "read", ["latest", ""])]),
    ("read the email from Carlos", [query("email", "read", "Carlos")]),
    ("summarize my unread emails", [query("email", "summarize", ["unread", "unread emails", ""])]),
    ("search the web for best hiking boots", [query("web", "search", "best hiking boots")]),
    ("google how tall is mount everest", [query("web", "search", "how tall is mount everest")]),
    ("look up the weather in Paris", [query("web", "search", ["the weather in Paris", "weather in Paris"])]),
    ("find the file called budget", [query("files", "search", "budget")]),
    ("where is my tax return pdf", [query("files", "search", ["tax return pdf", "tax return"])]),
    ("what's in my clipboard", [query("clipboard", ["read", "describe"])]),
    ("read me my notifications", [query("notifications", "read")]),
    ("any new notifications?", [query("notifications", ["read", "describe", "summarize"])]),
    ("SUMMARIZE THIS PAGE", [query("current_screen", "summarize")]),
    ("search my email for the flight confirmation", [query("email", "search", ["flight confirmation", "the flight confirmation"])]),
    ("whats the news today", [query("web", ["search", "summarize"], ["news today", "news", "the news today"])]),
    # compose
    ("reply saying I'll be there in 10", [compose("reply", "I'll be there in 10")]),
    ("write an email to Sam about the budget meeting", [compose("email", ["the budget meeting", "budget meeting"], "Sam")]),
    ("text mom that I landed", [compose("message", "I landed", "mom")]),
    ("send a message to Priya saying running late", [compose("message", "running late", "Priya")]),
    ("make a note: buy oat milk", [compose("note", "buy oat milk")]),
    ("jot down a note about the dentist on friday", [compose("note", ["the dentist on friday", "dentist on friday"])]),
    ("draft a post about our product launch", [compose("post", ["our product launch", "product launch"])]),
    ("write a summary of this article", [compose("summary", ["this article", "article"])]),
    ("reply to Jake thanks man", [compose("reply", "thanks man", "Jake")]),
    ("email the team that the deploy is done", [compose("email", "the deploy is done", "the team")]),
    ("respond with sounds good", [compose("reply", "sounds good")]),
    ("can you write a quick message to Leo asking if he's free tonight", [compose("message", ["if he's free tonight", "asking if he's free tonight", "is he free tonight"], "Leo")]),
    # say
    ("say hello", [say("hello")]),
    ("tell me a joke", [say("joke", "a joke")]),
    ("say good night to everyone", [say("good night to everyone", "good night")]),
    ("just say yes", [say("yes")]),
    # query_memory
    ("what's my wifi password again", [memory("wifi password", "my wifi password")]),
    ("do you remember where I parked", [memory("where I parked")]),
    ("what did I say my sister's name was", [memory("my sister's name", "sister's name")]),
    ("remind me what my gym schedule is", [memory("my gym schedule", "gym schedule")]),
    ("what's my favorite pizza place", [memory("my favorite pizza place", "favorite pizza place")]),
    ("when is my anniversary", [memory("my anniversary", "anniversary")]),
    # wait
    ("wait 30 seconds", [wait("30 seconds", 30)]),
    ("hold on until the download finishes", [wait(["the download finishes", "download finishes"])]),
    ("pause for five minutes", [wait(["five minutes", "5 minutes"])]),
    ("wait till the page loads", [wait(["the page loads", "page loads"])]),
    ("give it 10 seconds", [wait("10 seconds", 10)]),
    ("wait until the upload is done then stop", [wait(["the upload is done", "upload is done"])]),
    # schedule
    ("remind me to call mom at 5pm", [schedule("at 5pm", "call mom")]),
    ("remind me in 10 minutes to check the oven", [schedule("in 10 minutes", "check the oven")]),
    ("set a reminder for tomorrow morning to water the plants", [schedule("tomorrow morning", "water the plants")]),
    ("remind me on friday to submit the timesheet", [schedule("on friday", "submit the timesheet")]),
    ("tomorrow at 9 remind me about standup", [schedule(["tomorrow at 9", "at 9"], ["standup", "about standup"])]),
    ("REMIND ME TO STRETCH IN AN HOUR", [schedule("IN AN HOUR", "STRETCH")]),
    ("in twenty minutes remind me to take the pizza out", [schedule("in twenty minutes", "take the pizza out")]),
    ("schedule a reminder next monday to renew my passport", [schedule("next monday", "renew my passport")]),
    # clarify: missing values, choices, confirmations (question = the core phrase)
    ("open the file", [clarify("missing_value", "open the file")]),
    ("set the volume", [clarify("missing_value", "set the volume")]),
    ("remind me to pay rent", [clarify("missing_value", "remind me to pay rent")]),
    ("type something", [clarify("missing_value", "type something")]),
    ("open Notes or Reminders", [clarify("choice", "open Notes or Reminders", ["Notes", "Reminders"])]),
    ("click Save or Save As", [clarify("choice", "click Save or Save As", ["Save", "Save As"])]),
    ("delete report.pdf", [clarify("confirmation", "delete report.pdf")]),
    ("could you empty the trash?", [clarify("confirmation", "empty the trash")]),
    ("uninstall Slack", [clarify("confirmation", "uninstall Slack")]),
    ("wipe my downloads folder", [clarify("confirmation", "wipe my downloads folder")]),
    # two calls
    ("open Safari and go to github.com", [open_("app", "Safari"), open_("url", "github.com")]),
    ("turn on dark mode and set brightness to 50", [set_("dark mode", "on"), set_("brightness", "50")]),
    ("type hello and press enter", [perform("type", text="hello"), perform("key", keys=["enter", "return"])]),
    ("mute and turn on do not disturb", [set_(["volume", "sound", "mute"], "mute", "muted", "0", "off", "on"), set_("do not disturb", "on")]),
    # long, rambling
    ("hey so I was wondering if you could maybe open up spotify for me real quick", [open_("app", "spotify")]),
    ("alright, when you get a chance, could you please set the brightness to 60 because it's way too dark in here", [set_("brightness", "60")]),
    ("ok ok ok scroll down like 4 times i can't find the comments", [perform("scroll", direction="down", amount=4)]),
    ("I need you to remind me at 7pm tonight to pack my bag for the trip, thanks", [schedule(["at 7pm tonight", "at 7pm", "7pm tonight"], ["pack my bag for the trip", "pack my bag"])]),
    ("would you mind reading me the email from the landlord", [query("email", "read", ["the landlord", "landlord"])]),
]

# Requests no Pace tool fits: the right answer is no call.
NONE_ITEMS = [
    "order me a pizza", "book a flight to tokyo", "what's 17 times 23", "transfer $50 to Alex",
    "call an uber", "translate thank you into Japanese", "play some jazz", "turn on the kitchen lights",
    "lock the front door", "what time is it in Sydney", "start a 5 minute timer on the oven",
    "buy more printer ink", "water the plants", "feed the cat", "take a photo", "record a voice memo",
    "tell the TV to pause", "how do I say hello in German", "what's the capital of Peru",
    "ping the server at 10.0.0.4", "run the test suite", "deploy to production", "check my bank balance",
    "track my package", "convert 10 miles to km", "roll a dice", "flip a coin", "what's the stock price of Apple",
    "add eggs to my shopping list", "start the dishwasher",
]




# Tools that appear in no training data and no data generator of this project, each asked
# against the Pace catalog plus the tool plus a distractor (another tool of this list). Half
# the requests (or more) never use the tool's name words.
def fn(name, description, props, required):
    return {"name": name, "description": description,
            "parameters": {"type": "dict", "properties": props, "required": required}}


S = {"type": "string"}
I = {"type": "integer"}
F = {"type": "float"}

NEW_TOOLS = [
    fn("take_screenshot", "Capture the screen or part of it as an image.",
       {"region": {"type": "string", "enum": ["full_screen", "window", "selection"]}}, ["region"]),
    fn("log_expense", "Record money spent in the budget tracker.",
       {"amount": F, "category": S, "note": S}, ["amount", "category"]),
    fn("start_stopwatch", "Start a stopwatch that counts up.", {"label": S}, []),
    fn("convert_units", "Convert a quantity from one unit to another.",
       {"value": F, "from_unit": S, "to_unit": S}, ["value", "from_unit", "to_unit"]),
    fn("order_ride", "Order a car to take the user somewhere.",
       {"destination": S, "ride_type": {"type": "string", "enum": ["standard", "xl", "shared"]}}, ["destination"]),
    fn("play_podcast", "Play an episode of a podcast show.", {"show": S, "episode": S}, ["show"]),
    fn("add_to_shopping_list", "Add an item to the shared shopping list.",
       {"item": S, "quantity": I}, ["item"]),
    fn("check_package", "Look up where a shipped package is.", {"tracking_number": S}, ["tracking_number"]),
    fn("log_water_intake", "Record water the user drank, in milliliters.", {"amount_ml": I}, ["amount_ml"]),
    fn("start_workout", "Start recording a workout.", {"activity": S, "duration_minutes": I}, ["activity"]),
    fn("lookup_definition", "Give the dictionary definition of a word.", {"word": S}, ["word"]),
    fn("transfer_money", "Send money to a person from the user's bank account.",
       {"recipient": S, "amount": F}, ["recipient", "amount"]),
    fn("book_meeting_room", "Reserve a meeting room at a time.", {"room": S, "time": S}, ["room", "time"]),
    fn("share_location", "Share the user's live location with a contact.",
       {"contact": S, "duration_minutes": I}, ["contact"]),
    fn("toggle_flashlight", "Turn the phone's flashlight on or off.",
       {"state": {"type": "string", "enum": ["on", "off"]}}, ["state"]),
    fn("scan_document", "Scan a paper document with the camera into a PDF.", {"name": S}, []),
    fn("set_status_message", "Set the user's chat status message.", {"text": S, "emoji": S}, ["text"]),
    fn("roll_dice", "Roll dice and say the result.", {"sides": I, "count": I}, ["sides"]),
    fn("find_recipe", "Find a recipe for a dish.", {"dish": S, "max_minutes": I}, ["dish"]),
    fn("start_meditation", "Start a guided meditation session.",
       {"minutes": I, "sound": {"type": "string", "enum": ["rain", "ocean", "silence"]}}, ["minutes"]),
    fn("report_bug", "File a bug report with the app developers.",
       {"title": S, "severity": {"type": "string", "enum": ["low", "medium", "high"]}}, ["title"]),
    fn("save_bookmark", "Save a web address to the bookmarks.", {"url": S, "folder": S}, ["url"]),
]


def call(_tool, **args):
    return {_tool: {k: (v if isinstance(v, list) else [v]) for k, v in args.items()}}


# (tool, request, gold calls). Optional parameters not said are listed as "" (may be left out).
NEW_ITEMS = [
    ("take_screenshot", "take a screenshot of the whole screen", [call("take_screenshot", region="full_screen")]),
    ("take_screenshot", "grab a picture of just this window", [call("take_screenshot", region="window")]),
    ("take_screenshot", "capture what I've selected as an image", [call("take_screenshot", region="selection")]),
    ("take_screenshot", "screenshot the window please", [call("take_screenshot", region="window")]),
    ("take_screenshot", "save an image of everything on my display", [call("take_screenshot", region="full_screen")]),
    ("log_expense", "log 12 dollars for lunch", [call("log_expense", amount=12.0, category="lunch", note="")]),
    ("log_expense", "I spent 45 on groceries", [call("log_expense", amount=45.0, category="groceries", note="")]),
    ("log_expense", "add an expense of 80 for the electric bill", [call("log_expense", amount=80.0, category=["the electric bill", "electric bill"], note="")]),
    ("log_expense", "put down 3.50 for coffee in my budget", [call("log_expense", amount=3.5, category="coffee", note="")]),
    ("log_expense", "track 20 bucks on gas", [call("log_expense", amount=20.0, category="gas", note="")]),
    ("start_stopwatch", "start a stopwatch", [call("start_stopwatch", label="")]),
    ("start_stopwatch", "start counting up for my plank", [call("start_stopwatch", label=["my plank", "plank", ""])]),
    ("start_stopwatch", "time how long this takes", [call("start_stopwatch", label="")]),
    ("start_stopwatch", "begin a stopwatch called pasta", [call("start_stopwatch", label="pasta")]),
    ("start_stopwatch", "clock me starting now", [call("start_stopwatch", label="")]),
    ("convert_units", "convert 5 miles to kilometers", [call("convert_units", value=5.0, from_unit="miles", to_unit="kilometers")]),
    ("convert_units", "how many grams is 3 ounces", [call("convert_units", value=3.0, from_unit="ounces", to_unit="grams")]),
    ("convert_units", "what's 100 fahrenheit in celsius", [call("convert_units", value=100.0, from_unit="fahrenheit", to_unit="celsius")]),
    ("convert_units", "2 cups in milliliters?", [call("convert_units", value=2.0, from_unit="cups", to_unit="milliliters")]),
    ("convert_units", "change 60 inches into feet", [call("convert_units", value=60.0, from_unit="inches", to_unit="feet")]),
    ("order_ride", "order a ride to the airport", [call("order_ride", destination=["the airport", "airport"], ride_type="")]),
    ("order_ride", "get me a car to 42 Elm Street", [call("order_ride", destination="42 Elm Street", ride_type="")]),
    ("order_ride", "I need an xl ride to the stadium", [call("order_ride", destination=["the stadium", "stadium"], ride_type="xl")]),
    ("order_ride", "book a shared car home", [call("order_ride", destination="home", ride_type="shared")]),
    ("order_ride", "can you send a cab to take me to Union Station", [call("order_ride", destination="Union Station", ride_type="")]),
    ("play_podcast", "play the podcast Hardcore History", [call("play_podcast", show="Hardcore History", episode="")]),
    ("play_podcast", "put on the latest episode of Radiolab", [call("play_podcast", show="Radiolab", episode=["latest", "the latest episode", "latest episode", ""])]),
    ("play_podcast", "I want to listen to Serial", [call("play_podcast", show="Serial", episode="")]),
    ("play_podcast", "start episode 12 of The Daily", [call("play_podcast", show="The Daily", episode=["12", "episode 12"])]),
    ("play_podcast", "resume my podcast Planet Money", [call("play_podcast", show="Planet Money", episode="")]),
    ("add_to_shopping_list", "add bananas to the shopping list", [call("add_to_shopping_list", item="bananas", quantity="")]),
    ("add_to_shopping_list", "we need 2 cartons of milk", [call("add_to_shopping_list", item=["cartons of milk", "milk"], quantity=2)]),
    ("add_to_shopping_list", "put toothpaste on the list", [call("add_to_shopping_list", item="toothpaste", quantity="")]),
    ("add_to_shopping_list", "don't let me forget to buy 6 eggs", [call("add_to_shopping_list", item="eggs", quantity=6)]),
    ("add_to_shopping_list", "shopping list: olive oil", [call("add_to_shopping_list", item="olive oil", quantity="")]),
    ("check_package", "where is package 1Z999AA10123456784", [call("check_package", tracking_number="1Z999AA10123456784")]),
    ("check_package", "track 9400111899223344556677", [call("check_package", tracking_number="9400111899223344556677")]),
    ("check_package", "has my parcel TBA123456789 shipped yet", [call("check_package", tracking_number="TBA123456789")]),
    ("check_package", "check the package with tracking number LX556677CN", [call("check_package", tracking_number="LX556677CN")]),
    ("check_package", "status of delivery 7712 3344 5566", [call("check_package", tracking_number="7712 3344 5566")]),
    ("log_water_intake", "log 500 ml of water", [call("log_water_intake", amount_ml=500)]),
    ("log_water_intake", "I just drank 250 milliliters", [call("log_water_intake", amount_ml=250)]),
    ("log_water_intake", "record 300 ml water intake", [call("log_water_intake", amount_ml=300)]),
    ("log_water_intake", "had a glass of water, 200 ml", [call("log_water_intake", amount_ml=200)]),
    ("log_water_intake", "add 750 to my hydration", [call("log_water_intake", amount_ml=750)]),
    ("start_workout", "start a run", [call("start_workout", activity=["run", "a run"], duration_minutes="")]),
    ("start_workout", "begin a 30 minute yoga workout", [call("start_workout", activity="yoga", duration_minutes=30)]),
    ("start_workout", "I'm going cycling, track it", [call("start_workout", activity="cycling", duration_minutes="")]),
    ("start_workout", "start workout: swimming for 45 minutes", [call("start_workout", activity="swimming", duration_minutes=45)]),
    ("start_workout", "record my walk", [call("start_workout", activity=["walk", "my walk"], duration_minutes="")]),
    ("lookup_definition", "define serendipity", [call("lookup_definition", word="serendipity")]),
    ("lookup_definition", "what does ubiquitous mean", [call("lookup_definition", word="ubiquitous")]),
    ("lookup_definition", "look up the definition of ephemeral", [call("lookup_definition", word="ephemeral")]),
    ("lookup_definition", "meaning of the word quixotic?", [call("lookup_definition", word="quixotic")]),
    ("lookup_definition", "what's a capybara", [call("lookup_definition", word="capybara")]),
    ("transfer_money", "send 50 dollars to Alex", [call("transfer_money", recipient="Alex", amount=50.0)]),
    ("transfer_money", "transfer 200 to Maria", [call("transfer_money", recipient="Maria", amount=200.0)]),
    ("transfer_money", "pay Jordan back 15", [call("transfer_money", recipient="Jordan", amount=15.0)]),
    ("transfer_money", "wire 1000 to my landlord", [call("transfer_money", recipient=["my landlord", "landlord"], amount=1000.0)]),
    ("transfer_money", "give Sam 25 bucks from my account", [call("transfer_money", recipient="Sam", amount=25.0)]),
    ("book_meeting_room", "book the Maple room at 3pm", [call("book_meeting_room", room="Maple", time="3pm")]),
    ("book_meeting_room", "reserve conference room B for 10am tomorrow", [call("book_meeting_room", room=["conference room B", "B"], time="10am tomorrow")]),
    ("book_meeting_room", "grab the Fishbowl at noon", [call("book_meeting_room", room="Fishbowl", time="noon")]),
    ("book_meeting_room", "I need room 4.12 at 2:30", [call("book_meeting_room", room="4.12", time="2:30")]),
    ("book_meeting_room", "get us the big boardroom on monday at 9", [call("book_meeting_room", room=["big boardroom", "the big boardroom", "boardroom"], time=["monday at 9", "on monday at 9"])]),
    ("share_location", "share my location with Dana", [call("share_location", contact="Dana", duration_minutes="")]),
    ("share_location", "let Chris see where I am for 30 minutes", [call("share_location", contact="Chris", duration_minutes=30)]),
    ("share_location", "send my live location to mom", [call("share_location", contact="mom", duration_minutes="")]),
    ("share_location", "show Priya where I am", [call("share_location", contact="Priya", duration_minutes="")]),
    ("share_location", "share location with Ben for 60 minutes", [call("share_location", contact="Ben", duration_minutes=60)]),
    ("toggle_flashlight", "turn on the flashlight", [call("toggle_flashlight", state="on")]),
    ("toggle_flashlight", "flashlight off", [call("toggle_flashlight", state="off")]),
    ("toggle_flashlight", "I can't see anything, give me some light", [call("toggle_flashlight", state="on")]),
    ("toggle_flashlight", "switch the torch on", [call("toggle_flashlight", state="on")]),
    ("toggle_flashlight", "kill the light on my phone", [call("toggle_flashlight", state="off")]),
    ("scan_document", "scan this document", [call("scan_document", name="")]),
    ("scan_document", "scan my receipt as expenses march", [call("scan_document", name="expenses march")]),
    ("scan_document", "make a pdf of this paper", [call("scan_document", name="")]),
    ("scan_document", "digitize this contract and call it lease 2025", [call("scan_document", name="lease 2025")]),
    ("scan_document", "use the camera to scan the form", [call("scan_document", name="")]),
    ("set_status_message", "set my status to in a meeting", [call("set_status_message", text="in a meeting", emoji="")]),
    ("set_status_message", "change my status message to on vacation", [call("set_status_message", text="on vacation", emoji="")]),
    ("set_status_message", "let people know I'm at lunch", [call("set_status_message", text=["I'm at lunch", "at lunch"], emoji="")]),
    ("set_status_message", "status: heads down coding", [call("set_status_message", text="heads down coding", emoji="")]),
    ("set_status_message", "put up a status saying back at 3", [call("set_status_message", text="back at 3", emoji="")]),
    ("roll_dice", "roll a 20 sided die", [call("roll_dice", sides=20, count="")]),
    ("roll_dice", "roll 2 six-sided dice", [call("roll_dice", sides=6, count=2)]),
    ("roll_dice", "give me a d12 roll", [call("roll_dice", sides=12, count="")]),
    ("roll_dice", "throw 3 dice with 8 sides", [call("roll_dice", sides=8, count=3)]),
    ("roll_dice", "roll a 6", [call("roll_dice", sides=6, count="")]),
    ("find_recipe", "find a recipe for lasagna", [call("find_recipe", dish="lasagna", max_minutes="")]),
    ("find_recipe", "how do I make pad thai", [call("find_recipe", dish="pad thai", max_minutes="")]),
    ("find_recipe", "something with chickpeas I can cook in 20 minutes", [call("find_recipe", dish="chickpeas", max_minutes=20)]),
    ("find_recipe", "show me a banana bread recipe", [call("find_recipe", dish="banana bread", max_minutes="")]),
    ("find_recipe", "quick dinner idea with salmon under 30 minutes", [call("find_recipe", dish="salmon", max_minutes=30)]),
    ("start_meditation", "start a 10 minute meditation", [call("start_meditation", minutes=10, sound="")]),
    ("start_meditation", "meditate for 5 minutes with rain sounds", [call("start_meditation", minutes=5, sound="rain")]),
    ("start_meditation", "help me breathe for 15 minutes", [call("start_meditation", minutes=15, sound="")]),
    ("start_meditation", "guided session, 20 minutes, ocean", [call("start_meditation", minutes=20, sound="ocean")]),
    ("start_meditation", "I need to calm down, 3 minutes of silence", [call("start_meditation", minutes=3, sound="silence")]),
    ("report_bug", "report a bug: the app crashes on login", [call("report_bug", title="the app crashes on login", severity="")]),
    ("report_bug", "file a high severity bug that sync is broken", [call("report_bug", title="sync is broken", severity="high")]),
    ("report_bug", "tell the developers the dark theme looks wrong", [call("report_bug", title="the dark theme looks wrong", severity="")]),
    ("report_bug", "the save button does nothing, report it", [call("report_bug", title="the save button does nothing", severity="")]),
    ("report_bug", "submit a low priority issue about typos in settings", [call("report_bug", title=["typos in settings", "about typos in settings"], severity="low")]),
    ("save_bookmark", "bookmark example.com/pricing", [call("save_bookmark", url="example.com/pricing", folder="")]),
    ("save_bookmark", "save rust-lang.org to my bookmarks", [call("save_bookmark", url="rust-lang.org", folder="")]),
    ("save_bookmark", "add news.ycombinator.com to the Reading folder", [call("save_bookmark", url="news.ycombinator.com", folder="Reading")]),
    ("save_bookmark", "keep wikipedia.org/wiki/Otter for later", [call("save_bookmark", url="wikipedia.org/wiki/Otter", folder="")]),
    ("save_bookmark", "star the page arxiv.org/abs/2401.00001 in Papers", [call("save_bookmark", url="arxiv.org/abs/2401.00001", folder="Papers")]),
]

# Ambiguous or destructive requests against the Pace catalog: `clarify`, with the core phrase
# as the question (Pace's convention) and the kind that fits.
CLARIFY_ITEMS = [
    ("delete all my photos", "confirmation"), ("format the hard drive", "confirmation"),
    ("send it", "confirmation"), ("close everything without saving", "confirmation"),
    ("remove Spotify from my computer", "confirmation"), ("erase the whiteboard notes file", "confirmation"),
    ("reset my phone to factory settings", "confirmation"), ("log me out of every account", "confirmation"),
    ("cancel my subscription", "confirmation"), ("permanently delete the Old Projects folder", "confirmation"),
    ("shut down the computer now", "confirmation"), ("forward all my emails to Kim", "confirmation"),
    ("open it", "missing_value"), ("click that", "missing_value"), ("set the brightness", "missing_value"),
    ("turn it up", "missing_value"), ("send a message to Tom", "missing_value"), ("write an email", "missing_value"),
    ("remind me", "missing_value"), ("schedule something for later", "missing_value"),
    ("type my password", "missing_value"), ("open the document", "missing_value"),
    ("move this over there", "missing_value"), ("change the setting", "missing_value"),
    ("call him back", "missing_value"),
    ("open Chrome or Firefox", "choice", ["Chrome", "Firefox"]),
    ("play the blue or the red one", "choice", ["blue", "red"]),
    ("email Anna or Ben", "choice", ["Anna", "Ben"]),
    ("set the volume to 20 or 30", "choice", ["20", "30"]),
    ("open the pdf or the docx", "choice", ["pdf", "docx"]),
]


def item_line(i, cat, request, docs=None):
    return {"id": f"{cat}_{i}", "question": [[{"role": "user", "content": request}]], "function": docs or DOCS}


def write(cat, rows, answers):
    q = HERE / f"BFCL_v4_{cat}.json"
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if answers is not None:
        a = HERE / "possible_answer" / f"BFCL_v4_{cat}.json"
        a.parent.mkdir(exist_ok=True)
        a.write_text("".join(json.dumps(r) + "\n" for r in answers))


def main():
    cat = "handwritten_pace"
    seen = set()
    for req, _ in PACE_ITEMS:
        assert req.lower() not in seen, req
        seen.add(req.lower())
    write(cat, [item_line(i, cat, r) for i, (r, _) in enumerate(PACE_ITEMS)],
          [{"id": f"{cat}_{i}", "ground_truth": g} for i, (_, g) in enumerate(PACE_ITEMS)])
    cat = "handwritten_pace_irrelevance"
    write(cat, [item_line(i, cat, r) for i, r in enumerate(NONE_ITEMS)], None)
    cat = "handwritten_new_tools"
    by_name = {f["name"]: f for f in NEW_TOOLS}
    names = [f["name"] for f in NEW_TOOLS]
    rows, answers = [], []
    for i, (tool, request, gold) in enumerate(NEW_ITEMS):
        # the distractor: the tool seven places on in the list, a fixed, unrelated neighbour
        distractor = names[(names.index(tool) + 7) % len(names)]
        rows.append(item_line(i, cat, request, DOCS + [by_name[tool], by_name[distractor]]))
        answers.append({"id": f"{cat}_{i}", "ground_truth": gold})
    write(cat, rows, answers)
    cat = "handwritten_clarify"
    write(cat, [item_line(i, cat, c[0]) for i, c in enumerate(CLARIFY_ITEMS)],
          [{"id": f"{cat}_{i}", "ground_truth": [clarify(c[1], c[0], c[2] if len(c) > 2 else None)]}
           for i, c in enumerate(CLARIFY_ITEMS)])
    print(f"{len(PACE_ITEMS)} Pace requests, {len(NONE_ITEMS)} no-call requests, "
          f"{len(NEW_ITEMS)} requests for {len(NEW_TOOLS)} new tools, {len(CLARIFY_ITEMS)} to clarify")


if __name__ == "__main__":
    main()
