//! Benchmark-style APIs written for this project: calculators, lookups and bookings with typed
//! arguments (integers, floats, booleans, enums, lists of numbers or names, optional parameters
//! with defaults), the kind of function public function-calling benchmarks ask about. Each
//! catalog holds two to four of them (and half the time the whole `--tools` catalog too), and
//! its requests
//! - call one of its APIs, stating the values in words around them ("a base of 12.5 and a
//!   height of 4"; optional values only sometimes, so the default must be left out);
//! - call one API twice ("... and the same for 8 and 3") or two APIs ("..., and then ...")
//!   only where the request asks for two things;
//! - ask for an API the catalog lacks, which must get no call (irrelevance).
//!
//! No benchmark item is used: the APIs, descriptions and templates are this project's, and
//! none is a tool of the hand-written evaluation sets (a test checks the names).

use serde_json::{json, Map, Value};

use plansmith_core::{Tool, Trace};

use crate::pace::gen::{self, call, CallSpec, Draft, Style, A};
use crate::rng::Rng;
use crate::DataError;

/// What a parameter takes and how its value is drawn.
#[derive(Debug, Clone, Copy)]
enum Ty {
    /// An integer in the range.
    Int(i64, i64),
    /// A number in the range, half the time with one or two decimals.
    Num(i64, i64),
    /// A string copied from the request, drawn from the list.
    Str(&'static [&'static str]),
    /// One of the enum's values, said as it is spelled.
    Enum(&'static [&'static str]),
    /// `true` when the request says the phrase; left out (default `false`) otherwise.
    Bool,
    /// Two to four numbers in the range ("3, 8 and 12").
    Nums(i64, i64),
    /// Two to four strings of the list.
    Strs(&'static [&'static str]),
}

/// A parameter: name, type, description, how requests say it (`{}` is the value), and
/// whether it is required (an optional one has a default and is said in a share of requests).
#[derive(Debug, Clone, Copy)]
struct Param {
    name: &'static str,
    ty: Ty,
    desc: &'static str,
    say: &'static [&'static str],
    required: bool,
}

const fn req(
    name: &'static str,
    ty: Ty,
    desc: &'static str,
    say: &'static [&'static str],
) -> Param {
    Param {
        name,
        ty,
        desc,
        say,
        required: true,
    }
}

const fn opt(
    name: &'static str,
    ty: Ty,
    desc: &'static str,
    say: &'static [&'static str],
) -> Param {
    let mut p = req(name, ty, desc, say);
    p.required = false;
    p
}

/// An API: its possible names, description, the words a request asks for it with (the
/// parameters' phrases follow), and its parameters.
#[derive(Debug, Clone, Copy)]
struct Api {
    names: &'static [&'static str],
    desc: &'static str,
    ask: &'static [&'static str],
    params: &'static [Param],
}

#[rustfmt::skip]
const CITIES: &[&str] = &[
    "Lisbon", "Denver", "Osaka", "Nairobi", "Montreal", "Krakow", "Lima", "Perth", "Seville",
    "Boston", "Hanoi", "Zurich", "Austin", "Cork", "Busan",
];
#[rustfmt::skip]
const COMPANIES: &[&str] = &[
    "Acme Corp", "Globex", "Initech", "Umbrella", "Stark Industries", "Wayne Enterprises",
    "Hooli", "Vandelay Industries", "Soylent", "Tyrell",
];
#[rustfmt::skip]
const TICKERS: &[&str] = &["AAPL", "MSFT", "TSLA", "NVDA", "AMZN", "IBM", "ORCL", "NFLX"];
#[rustfmt::skip]
const PLAYERS: &[&str] = &[
    "Lionel Messi", "Serena Williams", "LeBron James", "Usain Bolt", "Simone Biles",
    "Roger Federer", "Megan Rapinoe", "Stephen Curry",
];
#[rustfmt::skip]
const TEAMS: &[&str] = &[
    "the Lakers", "Arsenal", "the Yankees", "Real Madrid", "the Celtics", "Bayern Munich",
    "the Packers", "Juventus",
];
#[rustfmt::skip]
const ELEMENTS: &[&str] = &[
    "carbon", "oxygen", "iron", "gold", "helium", "sodium", "copper", "neon", "silver",
];
#[rustfmt::skip]
const SPECIES: &[&str] = &[
    "red fox", "blue whale", "monarch butterfly", "snow leopard", "honey bee", "emperor penguin",
    "giant panda", "bald eagle",
];
#[rustfmt::skip]
const AUTHORS: &[&str] = &[
    "Jane Austen", "Toni Morrison", "Haruki Murakami", "Chinua Achebe", "Ursula K. Le Guin",
    "Gabriel Garcia Marquez", "Agatha Christie",
];
#[rustfmt::skip]
const GENRES: &[&str] = &["jazz", "rock", "classical", "hip hop", "folk", "electronic"];
#[rustfmt::skip]
const LANGUAGES: &[&str] = &["French", "German", "Japanese", "Portuguese", "Korean", "Italian"];
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "serendipity", "ephemeral", "ubiquitous", "melancholy", "resilience", "quixotic", "lucid",
];
#[rustfmt::skip]
const HOTELS: &[&str] = &[
    "the Grand Plaza", "Hotel Miramar", "the Riverside Inn", "the Alpine Lodge", "Casa Azul",
];
#[rustfmt::skip]
const RESTAURANTS: &[&str] = &[
    "Luigi's", "the Golden Dragon", "Cafe Mondo", "Blue Fin Sushi", "the Olive Tree",
];
#[rustfmt::skip]
const DISHES: &[&str] = &["lasagna", "pad thai", "paella", "ramen", "tacos", "risotto"];
#[rustfmt::skip]
const INGREDIENTS: &[&str] = &[
    "garlic", "basil", "lemons", "chickpeas", "spinach", "tofu", "mushrooms", "onions",
];
#[rustfmt::skip]
const MOVIES: &[&str] = &[
    "Inception", "Casablanca", "Spirited Away", "The Matrix", "Parasite", "Jaws", "Amelie",
];

#[rustfmt::skip]
const APIS: &[Api] = &[
    // (Triangle and circle areas were dropped: "the area of a circle with a radius of" is
    // eight words of a BFCL question, and the decontamination test caught it.)
    Api { names: &["paint_needed", "decor.paint_estimate", "estimate_paint"],
        desc: "Liters of paint needed to cover a wall.",
        ask: &["how much paint do I need", "estimate the paint", "work out the paint"],
        params: &[req("width_m", Ty::Num(1, 30), "Wall width in meters.", &["for a wall {} m wide", "for a wall that is {} meters wide"]),
                  req("height_m", Ty::Num(1, 10), "Wall height in meters.", &["and {} m high", "and {} meters tall"]),
                  opt("coats", Ty::Int(1, 4), "Coats of paint. Default 2.", &["with {} coats", ", {} coats"])] },
    Api { names: &["garden_soil", "garden.soil_volume", "soil_needed"],
        desc: "Cubic meters of soil to fill a garden bed.",
        ask: &["how much soil do I need", "soil for a raised bed", "calculate the soil"],
        params: &[req("area_m2", Ty::Num(1, 80), "Bed area in square meters.", &["for {} square meters", "to cover {} m2"]),
                  req("depth_cm", Ty::Int(5, 120), "Depth in centimeters.", &["{} cm deep", "at a depth of {} centimeters"])] },
    Api { names: &["cylinder_volume", "geometry.volume_cylinder", "calculate_cylinder_volume"],
        desc: "Volume of a cylinder from its radius and height.",
        ask: &["what's the volume of a cylinder", "calculate the volume of a cylinder", "how much fits in a cylinder"],
        params: &[req("radius", Ty::Num(1, 50), "Radius of the base.", &["with radius {}", "of radius {}"]),
                  req("height", Ty::Num(1, 100), "Height of the cylinder.", &["and height {}", "that is {} tall"])] },
    Api { names: &["factorial", "math.factorial", "compute_factorial"],
        desc: "Return the factorial of a non-negative integer.",
        ask: &["what is the factorial of", "compute the factorial of", "factorial of"],
        params: &[req("n", Ty::Int(0, 20), "The number.", &["{}"])] },
    Api { names: &["gcd", "math.gcd", "greatest_common_divisor"],
        desc: "Greatest common divisor of two integers.",
        ask: &["what is the greatest common divisor of", "find the gcd of", "gcd of"],
        params: &[req("a", Ty::Int(2, 999), "The first integer.", &["{}"]),
                  req("b", Ty::Int(2, 999), "The second integer.", &["and {}"])] },
    Api { names: &["is_prime", "math.check_prime", "prime_check"],
        desc: "Check whether a number is prime.",
        ask: &["is this number prime:", "check if it's prime:", "tell me whether this is a prime number:"],
        params: &[req("number", Ty::Int(2, 99999), "The integer to test.", &["{}"])] },
    Api { names: &["solve_quadratic", "algebra.quadratic_roots", "quadratic_roots"],
        desc: "Find the roots of a quadratic equation ax^2 + bx + c = 0.",
        ask: &["solve the quadratic equation", "find the roots of a quadratic", "roots of the quadratic"],
        params: &[req("a", Ty::Int(1, 20), "Coefficient of x squared.", &["with a = {}", "where a is {}"]),
                  req("b", Ty::Int(1, 50), "Coefficient of x.", &[", b = {}", ", b is {}"]),
                  req("c", Ty::Int(1, 50), "The constant term.", &["and c = {}", "and c is {}"])] },
    Api { names: &["mean", "stats.mean", "calculate_average"],
        desc: "Average of a list of numbers.",
        ask: &["what's the average of", "compute the mean of", "average these numbers:"],
        params: &[req("numbers", Ty::Nums(1, 500), "The numbers.", &["{}"])] },
    Api { names: &["standard_deviation", "stats.std_dev", "calc_stdev"],
        desc: "Standard deviation of a list of numbers.",
        ask: &["what's the standard deviation of", "compute the standard deviation for", "how spread out are"],
        params: &[req("values", Ty::Nums(1, 100), "The data points.", &["{}"]),
                  opt("sample", Ty::Bool, "Use the sample (n-1) formula. Default false.", &["as a sample", "using the sample formula"])] },
    Api { names: &["sort_numbers", "array.sort", "order_list"],
        desc: "Sort a list of numbers.",
        ask: &["sort", "put these in order:", "order the numbers"],
        params: &[req("items", Ty::Nums(1, 999), "The numbers to sort.", &["{}"]),
                  opt("order", Ty::Enum(&["ascending", "descending"]), "Sort order. Default ascending.", &["in {} order", ", {}"])] },
    Api { names: &["compound_interest", "finance.compound_interest", "calc_compound_interest"],
        desc: "Future value of an investment with compound interest.",
        ask: &["calculate compound interest", "how much will my savings grow", "what will an investment be worth"],
        params: &[req("principal", Ty::Int(100, 100000), "The amount invested.", &["on {} dollars", "for a principal of {}", "starting with {}"]),
                  req("rate", Ty::Num(1, 12), "Annual interest rate in percent.", &["at {} percent", "at a rate of {}%"]),
                  req("years", Ty::Int(1, 40), "Number of years.", &["over {} years", "for {} years"]),
                  opt("compounds_per_year", Ty::Int(1, 12), "Compounding periods per year. Default 1.", &["compounded {} times a year"])] },
    Api { names: &["loan_payment", "finance.monthly_payment", "mortgage_payment"],
        desc: "Monthly payment of a fixed-rate loan.",
        ask: &["what's the monthly payment on a loan", "calculate the monthly payment for a loan", "how much would I pay each month for a loan"],
        params: &[req("amount", Ty::Int(1000, 900000), "The amount borrowed.", &["of {}", "of {} dollars"]),
                  req("annual_rate", Ty::Num(1, 15), "Yearly interest rate in percent.", &["at {} percent", "with {}% interest"]),
                  req("term_years", Ty::Int(1, 30), "Length of the loan in years.", &["over {} years", "for {} years"])] },
    Api { names: &["get_stock_price", "stocks.quote", "fetch_share_price"],
        desc: "Latest share price for a stock ticker.",
        ask: &["what's the stock price of", "get the share price for", "how is the stock doing:"],
        params: &[req("ticker", Ty::Str(TICKERS), "The ticker symbol, e.g. IBM.", &["{}"]),
                  opt("exchange", Ty::Enum(&["nasdaq", "nyse", "lse"]), "The exchange. Default nasdaq.", &["on the {}"])] },
    Api { names: &["company_revenue", "finance.get_revenue", "lookup_revenue"],
        desc: "Reported annual revenue of a company for a year.",
        ask: &["what was the revenue of", "look up the annual revenue for", "how much money did this company make:"],
        params: &[req("company", Ty::Str(COMPANIES), "The company's name.", &["{}"]),
                  req("year", Ty::Int(2000, 2025), "The fiscal year.", &["in {}", "for {}"])] },
    Api { names: &["calculate_tip", "restaurant.tip", "tip_amount"],
        desc: "Tip for a bill at a given percentage, optionally split between people.",
        ask: &["how much should I tip", "calculate the tip", "work out the tip"],
        params: &[req("bill", Ty::Num(5, 400), "The bill total.", &["on a bill of {}", "on {} dollars", "for a {} bill"]),
                  req("percent", Ty::Int(5, 30), "Tip percentage.", &["at {} percent", "at {}%"]),
                  opt("people", Ty::Int(2, 12), "People splitting it. Default 1.", &["split {} ways", "between {} people"])] },
    Api { names: &["bmi", "health.body_mass_index", "calculate_bmi"],
        desc: "Body mass index from weight in kilograms and height in centimeters.",
        ask: &["what's my BMI", "work out my body mass index", "compute BMI"],
        params: &[req("weight_kg", Ty::Num(30, 200), "Weight in kilograms.", &["at {} kilos", "weighing {} kilograms"]),
                  req("height_cm", Ty::Int(120, 220), "Height in centimeters.", &["and {} cm tall", "at a height of {} cm"])] },
    Api { names: &["kinetic_energy", "physics.kinetic_energy", "calc_kinetic_energy"],
        desc: "Kinetic energy of a moving body.",
        ask: &["what's the kinetic energy of an object", "calculate the kinetic energy", "find the kinetic energy of a body"],
        params: &[req("mass", Ty::Num(1, 2000), "Mass in kilograms.", &["with a mass of {} kg", "of {} kilograms"]),
                  req("velocity", Ty::Num(1, 300), "Speed in meters per second.", &["moving at {} m/s", "at {} meters per second"])] },
    Api { names: &["travel_time", "physics.time_for_distance", "estimate_travel_time"],
        desc: "Time to cover a distance at a constant speed.",
        ask: &["how long does it take to go", "how long to travel", "estimate the travel time for"],
        params: &[req("distance_km", Ty::Num(1, 5000), "Distance in kilometers.", &["{} km", "{} kilometers"]),
                  req("speed_kmh", Ty::Int(5, 900), "Speed in kilometers per hour.", &["at {} km/h", "at {} kilometers an hour"])] },
    Api { names: &["element_info", "chemistry.element", "lookup_element"],
        desc: "Atomic number, mass and group of a chemical element.",
        ask: &["tell me about the element", "what's the atomic mass of", "look up the chemical element"],
        params: &[req("element", Ty::Str(ELEMENTS), "The element's name.", &["{}"]),
                  opt("property", Ty::Enum(&["atomic_number", "atomic_mass", "group"]), "Which property. Default all.", &["and give its {}"])] },
    Api { names: &["species_facts", "biology.animal_info", "get_species"],
        desc: "Habitat, diet and lifespan of an animal species.",
        ask: &["tell me about the", "what does this animal eat:", "give me facts about the"],
        params: &[req("species", Ty::Str(SPECIES), "Common name of the species.", &["{}"])] },
    Api { names: &["player_stats", "sports.player_statistics", "get_player_stats"],
        desc: "A player's statistics for a season.",
        ask: &["show me the stats for", "how did this player do:", "get season statistics for"],
        params: &[req("player", Ty::Str(PLAYERS), "Full name of the player.", &["{}"]),
                  opt("season", Ty::Int(2005, 2025), "The season's year. Default the current one.", &["in {}", "for the {} season"])] },
    Api { names: &["team_schedule", "sports.fixtures", "upcoming_games"],
        desc: "Upcoming games of a team.",
        ask: &["when do they play next:", "show the next games of", "get the schedule for"],
        params: &[req("team", Ty::Str(TEAMS), "The team.", &["{}"]),
                  opt("games", Ty::Int(1, 10), "How many games. Default 5.", &["for the next {} games", ", {} games"])] },
    Api { names: &["hotel_search", "travel.find_hotels", "search_hotels"],
        desc: "Find hotels in a city for a number of nights.",
        ask: &["find me a hotel", "search for hotels", "look for a place to stay"],
        params: &[req("city", Ty::Str(CITIES), "The city.", &["in {}"]),
                  req("nights", Ty::Int(1, 21), "Number of nights.", &["for {} nights"]),
                  opt("max_price", Ty::Int(40, 600), "Highest nightly price. Default no limit.", &["under {} a night", "for at most {} per night"]),
                  opt("pool", Ty::Bool, "Only hotels with a pool. Default false.", &["with a pool"])] },
    Api { names: &["reserve_hotel_room", "travel.book_hotel", "hotel_booking"],
        desc: "Reserve a room at a named hotel.",
        ask: &["book a room at", "reserve a room at", "get me a room at"],
        params: &[req("hotel", Ty::Str(HOTELS), "The hotel's name.", &["{}"]),
                  req("guests", Ty::Int(1, 6), "Number of guests.", &["for {} guests", "for {} people"]),
                  opt("room_type", Ty::Enum(&["single", "double", "suite"]), "Room type. Default double.", &["in a {} room", ", a {}"])] },
    Api { names: &["restaurant_reservation", "dining.reserve_table", "book_table"],
        desc: "Reserve a table at a restaurant.",
        ask: &["reserve a table at", "book a table at", "get us a table at"],
        params: &[req("restaurant", Ty::Str(RESTAURANTS), "The restaurant.", &["{}"]),
                  req("party_size", Ty::Int(1, 12), "Number of diners.", &["for {}", "for {} people"]),
                  opt("outdoor", Ty::Bool, "Seat outside. Default false.", &["outside", "on the terrace"])] },
    Api { names: &["nutrition_facts", "food.nutrition", "get_nutrition"],
        desc: "Calories and macronutrients of a dish per serving.",
        ask: &["how many calories are in", "nutrition facts for", "what's the nutritional value of"],
        params: &[req("dish", Ty::Str(DISHES), "The dish.", &["{}"]),
                  opt("servings", Ty::Int(1, 8), "Number of servings. Default 1.", &["for {} servings", ", {} portions"])] },
    Api { names: &["dishes_with_ingredients", "food.search_by_ingredients", "cook_with"],
        desc: "Dishes that can be cooked with the given ingredients.",
        ask: &["what can I cook with", "what can I make with", "suggest dishes using"],
        params: &[req("ingredients", Ty::Strs(INGREDIENTS), "Ingredients at hand.", &["{}"]),
                  opt("vegetarian", Ty::Bool, "Only vegetarian dishes. Default false.", &["that are vegetarian", ", vegetarian only"])] },
    Api { names: &["books_by_author", "library.search_author", "find_books"],
        desc: "Books written by an author.",
        ask: &["list books by", "what has this author written:", "find books written by"],
        params: &[req("author", Ty::Str(AUTHORS), "The author's name.", &["{}"]),
                  opt("limit", Ty::Int(1, 20), "How many books. Default 10.", &["and show {}", ", top {}"])] },
    Api { names: &["movie_showtimes", "cinema.showtimes", "find_showtimes"],
        desc: "Show times of a film in a city.",
        ask: &["when is", "find show times for", "what time is"],
        params: &[req("title", Ty::Str(MOVIES), "The film's title.", &["{} playing", "{}"]),
                  req("city", Ty::Str(CITIES), "The city.", &["in {}"])] },
    Api { names: &["playlist_by_genre", "music.make_playlist", "genre_playlist"],
        desc: "Build a playlist of a genre with a number of songs.",
        ask: &["make a playlist of", "build me a playlist of", "create a playlist with"],
        params: &[req("genre", Ty::Enum(GENRES), "The genre.", &["{}", "{} music"]),
                  req("songs", Ty::Int(5, 100), "Number of songs.", &["with {} songs", ", {} tracks"])] },
    Api { names: &["translate_text", "language.translate", "translation"],
        desc: "Translate a word or phrase into another language.",
        ask: &["translate", "how do you say", "what's the translation of"],
        params: &[req("text", Ty::Str(WORDS), "The text to translate.", &["{}"]),
                  req("target_language", Ty::Str(LANGUAGES), "The language to translate into.", &["into {}", "in {}"])] },
    Api { names: &["city_population", "geo.population", "get_population"],
        desc: "Population of a city, optionally in a given year.",
        ask: &["what is the population of", "how many people live in", "population of"],
        params: &[req("city", Ty::Str(CITIES), "The city.", &["{}"]),
                  opt("year", Ty::Int(1950, 2025), "The year. Default the latest census.", &["in {}", "as of {}"])] },
    Api { names: &["time_zone_difference", "geo.timezone_offset", "hours_between_cities"],
        desc: "Hours of time difference between two cities.",
        ask: &["what's the time difference between", "how many hours apart are", "time zone gap between"],
        params: &[req("from_city", Ty::Str(CITIES), "The first city.", &["{}"]),
                  req("to_city", Ty::Str(CITIES), "The second city.", &["and {}"])] },
    Api { names: &["random_integers", "random.integers", "draw_numbers"],
        desc: "Draw random integers in a range.",
        ask: &["give me random numbers", "pick random integers", "draw random numbers"],
        params: &[req("low", Ty::Int(0, 100), "Smallest allowed value.", &["from {}"]),
                  req("high", Ty::Int(101, 9999), "Largest allowed value.", &["to {}"]),
                  req("count", Ty::Int(1, 50), "How many numbers.", &[", {} of them", ", {} in total"])] },
    Api { names: &["pressure_at_depth", "physics.hydrostatic_pressure", "water_pressure"],
        desc: "Water pressure at a depth below the surface.",
        ask: &["what's the water pressure", "calculate the pressure", "how much pressure is there"],
        params: &[req("depth_m", Ty::Num(1, 4000), "Depth in meters.", &["at {} meters deep", "at a depth of {} m"]),
                  opt("salt_water", Ty::Bool, "Sea water rather than fresh. Default false.", &["in the sea", "in salt water"])] },
];

fn schema_of(p: &Param) -> Value {
    let mut s = match p.ty {
        Ty::Int(..) => json!({"type": "integer"}),
        Ty::Num(..) => json!({"type": "number"}),
        Ty::Str(_) => json!({"type": "string"}),
        Ty::Enum(values) => json!({"type": "string", "enum": values}),
        Ty::Bool => json!({"type": "boolean", "default": false}),
        Ty::Nums(..) => json!({"type": "array", "items": {"type": "number"}}),
        Ty::Strs(_) => json!({"type": "array", "items": {"type": "string"}}),
    };
    s["description"] = json!(p.desc);
    s
}

/// The API as an OpenAI tool value under `name`.
fn tool_value(api: &Api, name: &str) -> Value {
    let props: Map<String, Value> = api
        .params
        .iter()
        .map(|p| (p.name.to_string(), schema_of(p)))
        .collect();
    let required: Vec<&str> = api
        .params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name)
        .collect();
    json!({"type": "function", "function": {"name": name, "description": api.desc,
        "parameters": {"type": "object", "properties": props, "required": required}}})
}

/// A number as a request says it: an integer, or half the time one with one or two decimals
/// (never a trailing zero, so the plan's number is spelled as the request spells it).
fn number(rng: &mut Rng, lo: i64, hi: i64, decimals: bool) -> String {
    let whole = rng.range(lo, hi);
    if !decimals || rng.chance(0.5) {
        // "1,500" as often as "1500": the copy rule reads both as 1500
        if whole >= 1000 && rng.chance(0.5) {
            return format!("{},{:03}", whole / 1000, whole % 1000);
        }
        return whole.to_string();
    }
    // one decimal, two, or a price-like "3.50" whose zero stays (the plan says 3.5)
    let frac = match rng.below(5) {
        0 | 1 => rng.range(1, 9).to_string(),
        2 | 3 => format!("{:02}", rng.range(1, 99))
            .trim_end_matches('0')
            .to_string(),
        _ => format!("{}0", rng.range(1, 9)),
    };
    format!("{whole}.{frac}")
}

/// "a", "a and b", "a, b and c"
fn listed(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Slots, request phrase and argument for one parameter; `tag` keeps slot names apart.
fn say_param(rng: &mut Rng, d: &mut Draft, p: &Param, tag: &str) -> (String, A) {
    let slot = |i: usize| -> &'static str {
        // Slot names must be `'static`: leak a handful per draft (tiny, bounded by the
        // number of distinct names, which is small and reused through the interner below).
        intern(&format!("{tag}{}{i}", p.name))
    };
    let phrase = *rng.pick(p.say);
    let (text, arg) = match p.ty {
        Ty::Int(lo, hi) | Ty::Num(lo, hi) => {
            let v = number(rng, lo, hi, matches!(p.ty, Ty::Num(..)));
            let s = slot(0);
            d.slot(s, "api", v);
            (format!("{{{s}}}"), A::Num(s))
        }
        Ty::Str(pool) => {
            let s = slot(0);
            d.slot(s, "api", *rng.pick(pool));
            (format!("{{{s}}}"), A::Slot(s))
        }
        Ty::Enum(values) => {
            let s = slot(0);
            d.slot(s, "api", *rng.pick(values));
            (format!("{{{s}}}"), A::EnumOf(s))
        }
        Ty::Bool => return (phrase.to_string(), A::Bool(true)),
        Ty::Nums(lo, hi) => {
            let k = 2 + rng.below(3);
            let mut names = Vec::new();
            let mut args = Vec::new();
            for i in 0..k {
                let s = slot(i);
                d.slot(s, "api", number(rng, lo, hi, false));
                names.push(format!("{{{s}}}"));
                args.push(A::Num(s));
            }
            (listed(&names), A::Arr(args))
        }
        Ty::Strs(pool) => {
            let k = 2 + rng.below(3);
            let mut picked: Vec<&str> = Vec::new();
            while picked.len() < k.min(pool.len()) {
                let v = *rng.pick(pool);
                if !picked.contains(&v) {
                    picked.push(v);
                }
            }
            let mut names = Vec::new();
            let mut args = Vec::new();
            for (i, v) in picked.into_iter().enumerate() {
                let s = slot(i);
                d.slot(s, "api", v);
                names.push(format!("{{{s}}}"));
                args.push(A::Slot(s));
            }
            (listed(&names), A::Arr(args))
        }
    };
    (phrase.replace("{}", &text), arg)
}

/// Interned slot names (drafts need `&'static str`; the set is bounded by the APIs'
/// parameter names times a few indices and tags).
fn intern(s: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&n) = names.get(s) {
        return n;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The words and call for one request to `api` (named `name` in the catalog): its ask
/// phrase, every required parameter and each optional one with probability 0.4.
fn ask(
    rng: &mut Rng,
    d: &mut Draft,
    api: &Api,
    name: &'static str,
    tag: &str,
) -> (String, CallSpec) {
    let mut words = vec![rng.pick(api.ask).to_string()];
    let mut args = Vec::new();
    for p in api.params {
        if !p.required && !rng.chance(0.4) {
            continue;
        }
        let (text, arg) = say_param(rng, d, p, tag);
        words.push(text);
        args.push((p.name, arg));
    }
    let mut text = String::new();
    for w in words {
        if !text.is_empty() && !w.starts_with(',') {
            text.push(' ');
        }
        text.push_str(&w);
    }
    (text, call(name, args))
}

fn is_question(ask: &str) -> bool {
    ["what", "how", "when", "is "]
        .iter()
        .any(|q| ask.starts_with(q))
}

/// `n` requests over catalogs of two to four APIs (half of them beside the whole `home`
/// catalog), `group` requests per catalog (0 and 1 both mean one). Of the requests, ~10% ask
/// for an API not in the catalog (no call), ~10% ask for one API twice, ~8% for two APIs; the
/// rest call one. Every trace passes the DSL round trip and copy-fidelity validation.
pub fn api_traces(
    n: usize,
    seed: u64,
    home: &[Tool],
    group: usize,
) -> Result<Vec<Trace>, DataError> {
    let mut rng = Rng::new(seed).fork(0xA915);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    let mut budget = crate::DrawBudget::new(n, "API requests");
    let openai = |t: &Tool| {
        json!({"type": "function", "function": {"name": t.name,
            "description": t.description, "parameters": t.parameters}})
    };
    while out.len() < n {
        budget.draw(out.len())?;
        let k = 2 + rng.below(3);
        // The catalog's APIs and the names they go by in it.
        let mut chosen: Vec<(usize, &'static str)> = Vec::new();
        while chosen.len() < k {
            let i = rng.below(APIS.len());
            if chosen.iter().all(|(j, _)| *j != i) {
                let name = *rng.pick(APIS[i].names);
                chosen.push((i, name));
            }
        }
        let mut tools: Vec<Value> = chosen
            .iter()
            .map(|&(i, name)| tool_value(&APIS[i], name))
            .collect();
        let with_home = !home.is_empty() && rng.chance(0.5);
        if with_home {
            tools.extend(home.iter().map(openai));
        }
        rng.shuffle(&mut tools);
        for _ in 0..group.max(1) {
            if out.len() == n {
                break;
            }
            let mut d = Draft::new("api", Style::Imperative);
            let roll = rng.below(100);
            let (tpl, calls) = if roll < 10 {
                // An API the catalog lacks: no call.
                let i = loop {
                    let i = rng.below(APIS.len());
                    if chosen.iter().all(|(j, _)| *j != i) {
                        break i;
                    }
                };
                let (text, _) = ask(&mut rng, &mut d, &APIS[i], APIS[i].names[0], "a");
                (text, Vec::new())
            } else if roll < 20 {
                // One API twice: "..., and also ...".
                let (i, name) = *rng.pick(&chosen);
                let (first, c1) = ask(&mut rng, &mut d, &APIS[i], name, "a");
                let (second, c2) = ask(&mut rng, &mut d, &APIS[i], name, "b");
                let joint = rng.pick(&[", and also ", ", then ", " and "]);
                (format!("{first}{joint}{second}"), vec![c1, c2])
            } else if roll < 28 {
                // Two different APIs of the catalog.
                let a = rng.below(chosen.len());
                let b = (a + 1 + rng.below(chosen.len() - 1)) % chosen.len();
                let (ia, na) = chosen[a];
                let (ib, nb) = chosen[b];
                let (first, c1) = ask(&mut rng, &mut d, &APIS[ia], na, "a");
                let (second, c2) = ask(&mut rng, &mut d, &APIS[ib], nb, "b");
                let joint = rng.pick(&[", and then ", " and ", ". Also "]);
                (format!("{first}{joint}{second}"), vec![c1, c2])
            } else {
                let (i, name) = *rng.pick(&chosen);
                let (text, c) = ask(&mut rng, &mut d, &APIS[i], name, "a");
                (text, vec![c])
            };
            if is_question(&tpl) {
                d.style = Style::Question;
            }
            d.tpl = tpl;
            d.calls = calls;
            let r = gen::realize(&d, &mut rng);
            if !seen.insert(r.request.to_lowercase()) {
                continue;
            }
            out.push(crate::families::trace_with_tools(
                tools.clone(),
                r.plan.calls,
                r.request,
                "benchmark-style API",
            )?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_validate_and_carry_typed_values() {
        let traces = api_traces(600, 7, &[], 8).unwrap();
        assert_eq!(traces.len(), 600);
        let mut floats = 0;
        let mut lists = 0;
        let mut bools = 0;
        let mut none = 0;
        let mut two = 0;
        for t in &traces {
            match t.calls.len() {
                0 => none += 1,
                2 => two += 1,
                _ => {}
            }
            for c in &t.calls {
                for v in c.arguments.values() {
                    floats += usize::from(v.as_f64().is_some_and(|f| f.fract() != 0.0));
                    lists += usize::from(v.is_array());
                    bools += usize::from(v.is_boolean());
                }
            }
        }
        assert!(
            floats > 30 && lists > 20 && bools > 10,
            "{floats} {lists} {bools}"
        );
        assert!((30..=100).contains(&none), "{none} requests with no call");
        // Numbers as people write them ("1,500", "3.50"), each validated as a copy above.
        let separated = traces
            .iter()
            .filter(|t| {
                t.request
                    .split(' ')
                    .any(|w| w.contains(',') && w.starts_with(|c: char| c.is_ascii_digit()))
            })
            .count();
        let trailing_zero = traces
            .iter()
            .filter(|t| {
                t.request
                    .split(|c: char| !c.is_ascii_digit() && c != '.')
                    .any(|w| w.contains('.') && w.ends_with('0'))
            })
            .count();
        assert!(
            separated > 5 && trailing_zero > 5,
            "{separated} {trailing_zero}"
        );
        assert!((60..=160).contains(&two), "{two} two-call requests");
        // Deterministic per seed.
        let again = api_traces(600, 7, &[], 8).unwrap();
        assert_eq!(
            serde_json::to_string(&traces[..50]).unwrap(),
            serde_json::to_string(&again[..50]).unwrap()
        );
    }

    #[test]
    fn a_group_shares_one_catalog_and_optional_values_are_left_out_when_unsaid() {
        let traces = api_traces(64, 3, &[], 32).unwrap();
        assert_eq!(traces[0].tools, traces[31].tools);
        assert_ne!(traces[0].tools, traces[32].tools);
        // An optional parameter is sometimes said, sometimes left to its default.
        let hotel = api_traces(3000, 5, &[], 32).unwrap();
        let (mut said, mut unsaid) = (0, 0);
        for t in &hotel {
            for c in &t.calls {
                if c.name.contains("hotel") && c.arguments.contains_key("city") {
                    if c.arguments.contains_key("max_price") {
                        said += 1;
                    } else {
                        unsaid += 1;
                    }
                }
            }
        }
        assert!(said > 5 && unsaid > 5, "{said} {unsaid}");
    }

    #[test]
    fn no_api_is_a_hand_written_evaluation_tool() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval/handwritten");
        let text = std::fs::read_to_string(format!("{dir}/BFCL_v4_handwritten_new_tools.json"))
            .expect("the hand-written new-tool set is committed");
        let mut held_out = std::collections::HashSet::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            for f in v["function"].as_array().unwrap() {
                held_out.insert(f["name"].as_str().unwrap().to_string());
            }
        }
        assert!(held_out.len() >= 20);
        for api in APIS {
            for name in api.names {
                let bare = name.rsplit('.').next().unwrap();
                assert!(
                    !held_out.contains(*name) && !held_out.contains(bare),
                    "{name}"
                );
            }
        }
    }
}
